"""xlapy: an XLA-like tensor compiler in Python.

    import numpy as np
    import xlapy
    from xlapy import ops

    @xlapy.jit_compile
    def layer(x, w, b):
        return ops.softmax(ops.relu(x @ w + b), axis=-1)

    layer(x, w, b)                                   # numpy in, numpy out
    layer.lower(x, w, b).as_hlo_text()               # HLO before passes
    layer.lower(x, w, b).compile().as_hlo_text()     # after the CPU pipeline

The user API is the frontend's: `jit_compile`, `ops`, `grad`, `value_and_grad`,
`cond`, `while_loop`, `fori_loop`, and `distribute` (tf.distribute-style strategies
over several devices and MPI processes; `ops.collective` has TF's collective ops), and
`profiler` (`with xlapy.profiler.trace(path):` writes a Perfetto / chrome://tracing trace).
The layers are subpackages, imported from the top down (DESIGN.md):

    xlapy.frontend     tf2xla-style op kernels, tracing, jit_compile, autodiff, hlo-opt
    xlapy.passes       HloModulePass, pipelines, the passes
    xlapy.hlo          the IR, parser, printer, verifier, builder, reference evaluator
    xlapy.backend_cpu  LLVM code generation for a target CPU, the executable
    xlapy.runtime      streams, events, memory, the thread pool (knows nothing of HLO)

In the repository each subpackage is a top-level folder (`hlo/`, `passes/`, ...);
pyproject.toml installs them under this root (setuptools' package-dir mapping).
"""
import sys as _sys

from . import backend_cpu, frontend, hlo, passes, runtime
from . import profiler
from .frontend import (cond, distribute, fori_loop, grad, jit_compile, ops, value_and_grad,
                       while_loop)

# `xlapy.ops` and `xlapy.distribute` are the frontend's modules under a shorter name:
# registered as such, `from xlapy.distribute import Mesh` and `import xlapy.ops.math`
# find the same module objects (never a second copy loaded from the same file).
for _short, _module in (("ops", ops), ("distribute", distribute)):
    _sys.modules[f"{__name__}.{_short}"] = _module
    for _name, _sub in list(_sys.modules.items()):
        if _name.startswith(_module.__name__ + "."):
            _sys.modules[f"{__name__}.{_short}{_name[len(_module.__name__):]}"] = _sub
del _short, _module, _name, _sub

__version__ = "0.1.0"
__all__ = ["jit_compile", "ops", "grad", "value_and_grad", "cond", "while_loop", "fori_loop",
           "distribute", "profiler", "hlo", "passes", "backend_cpu", "frontend", "runtime"]
