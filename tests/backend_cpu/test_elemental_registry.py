"""The element generators of the looping ops (reduce, reduce-window, dot, convolution)
are registered by elemental/reduction.py and elemental/contraction.py into
elemental/generators.py, which imports neither (no cycle); the package imports both."""
from __future__ import annotations

import subprocess
import sys

from xlapy.backend_cpu.elemental import contraction, generators, reduction


def test_every_looping_opcode_has_its_generator():
    assert set(generators._LOOPING) == set(generators.LOOPING_OPCODES)
    assert generators._LOOPING["reduce"] is reduction.make_generator
    assert generators._LOOPING["reduce-window"] is reduction.make_generator
    assert generators._LOOPING["dot"] is contraction.make_generator
    assert generators._LOOPING["convolution"] is contraction.make_generator
    assert generators.LOOPING_OPCODES <= generators.GENERATOR_OPCODES


def test_importing_one_module_of_the_package_completes_the_registry():
    script = ("from xlapy.backend_cpu.elemental import generators\n"
              "print(sorted(generators._LOOPING))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(sorted(generators.LOOPING_OPCODES))
