"""llvm/target_machine.py binds the JIT's libm symbols without running ldconfig (find_library)."""
from __future__ import annotations

import ctypes.util
import math

import pytest

from xlapy.backend_cpu.llvm import target_machine


def test_libm_opens_by_soname_without_find_library(monkeypatch):
    try:
        ctypes.CDLL("libm.so.6")
    except OSError:
        pytest.skip("not a glibc system")

    def no_subprocess(name):
        raise AssertionError("find_library runs ldconfig in a subprocess")
    monkeypatch.setattr(ctypes.util, "find_library", no_subprocess)
    libm = target_machine._open_libm()
    cbrt = libm.cbrt
    cbrt.restype, cbrt.argtypes = ctypes.c_double, [ctypes.c_double]
    assert math.isclose(cbrt(27.0), 3.0)
