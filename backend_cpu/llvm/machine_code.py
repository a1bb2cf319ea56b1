"""Machine code: an optimized LLVM module made object code, and object code loaded into
an execution engine (`Jit`), once every symbol it needs resolves.

Code generation runs once, to an object file, which the engine then loads: the
object code is what the disk cache (disk_cache.py) stores, and loading it again
costs no LLVM optimization or code generation.
"""
from __future__ import annotations

import llvmlite.binding as llvm

from . import native_symbols, target_machine


class Jit:
    """JIT-compiled machine code: `lookup(name) -> address`; `object_code` is its bytes."""

    def __init__(self, engine, object_code: bytes | None):
        self.engine = engine
        self.object_code = object_code

    def lookup(self, name: str) -> int:
        address = self.engine.get_function_address(name)
        if not address:
            raise KeyError(f"backend_cpu: no function named {name!r} in the compiled code")
        return address


def _engine_target_machine():
    # MCJIT takes ownership of its TargetMachine and frees it with the engine: every
    # engine needs a fresh one, never target_machine.py's cached one.
    return target_machine.new_target_machine()


def object_code(module_ref, strength_reduction: bool = True) -> bytes:
    """The object code of an optimized module, for `jit_object` and the cache
    (emitting does not take ownership of the target machine: the shared one serves)."""
    return target_machine.emit_object(module_ref, strength_reduction=strength_reduction)


def jit_module(module_ref, strength_reduction: bool = True) -> Jit:
    """JIT-compiles an optimized module; keeps its object code for the cache.

    Code generation runs once, to an object file, which the engine then loads
    (llvmlite's object-cache hook cannot be used: its engine crashes on disposal).
    """
    return jit_object(object_code(module_ref, strength_reduction))


def jit_object(object_code: bytes) -> Jit:
    """Loads object code into a fresh engine (no LLVM optimization or codegen), once
    every symbol it needs resolves (native_symbols.py: an unresolved one would be
    address zero, a crash at the first call)."""
    native_symbols.ensure_resolvable(object_code)
    engine = llvm.create_mcjit_compiler(target_machine.parse_and_verify(""),
                                        _engine_target_machine())
    object_file = llvm.ObjectFileRef.from_data(object_code)
    engine.add_object_file(object_file)
    engine.finalize_object()
    jit = Jit(engine, object_code)
    jit._object_file = object_file      # lives as long as the engine that loaded it
    return jit
