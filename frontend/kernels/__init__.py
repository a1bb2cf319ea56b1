"""The kernels, grouped by family; importing the package registers them all."""
from . import (elementwise, activations, reduction, shape, nn, linalg, conv,  # noqa: F401
               indexing, collective, random, special, sorting, complex)
