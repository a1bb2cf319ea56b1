"""Native folds for the runtime's in-process collectives (runtime/collective_util.py).

An all-reduce over N devices in one process is, per element, p0 op p1 op ... op p(N-1)
stored into N buffers. numpy can fold only two arrays per call and store into one, so
the runtime's numpy path makes two passes over memory (fold a chunk, then every device
copies the other chunks); this module compiles the one-pass loop:

    for i in [begin, end):   acc = parts[0][i]; acc = acc op parts[k][i] (k = 1..N-1)
                             outs[j][i] = acc (j = 0..M-1)

with [vbegin, vend) in 64-byte vectors and the rest one element at a time. The
non-temporal variant stores the vectors around the cache (aligned stores: the runtime
passes a vbegin where every out is at a 64-byte line) and fences before it returns.
The order of the fold is numpy's, so the bits are the same (no fast-math flags).

One small LLVM module per (op, dtype, N, M, non-temporal), compiled on first use for
the current target and kept for the process. `provide` is what the runtime calls;
backend_cpu/__init__.py installs it. Floating min/max follow numpy's minimum/maximum
(a NaN operand gives NaN); bool, f16, bf16 and complex buffers stay on numpy's path.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..runtime.collective_util import VECTOR_BYTES
from .llvm import machine_code

_TYPES = {"f4": "float", "f8": "double", "i1": "i8", "u1": "i8", "i2": "i16", "u2": "i16",
          "i4": "i32", "u4": "i32", "i8": "i64", "u8": "i64"}

_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                              ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)

_kept: list = []          # the engines behind every fold handed out (they must outlive it)


def _combine(op: str, kind: str, ty: str, a: str, b: str, out: str) -> list[str]:
    """IR lines computing `out = a op b` (scalars or vectors of `ty`)."""
    floating = kind == "f"
    if op == "sum":
        return [f"{out} = {'fadd' if floating else 'add'} {ty} {a}, {b}"]
    if op == "prod":
        return [f"{out} = {'fmul' if floating else 'mul'} {ty} {a}, {b}"]
    if op in ("and", "or"):
        return [f"{out} = {op} {ty} {a}, {b}"]
    less = op == "min"
    if floating:
        # numpy: (a < b or a is NaN) ? a : b for minimum (> for maximum): b's NaN goes
        # through the compare, a's through the second select.
        return [f"{out}.c = fcmp {'olt' if less else 'ogt'} {ty} {a}, {b}",
                f"{out}.n = fcmp uno {ty} {a}, {a}",
                f"{out}.k = or {_mask(ty)} {out}.c, {out}.n",
                f"{out} = select {_mask(ty)} {out}.k, {ty} {a}, {ty} {b}"]
    predicate = ("s" if kind == "i" else "u") + ("lt" if less else "gt")
    return [f"{out}.c = icmp {predicate} {ty} {a}, {b}",
            f"{out} = select {_mask(ty)} {out}.c, {ty} {a}, {ty} {b}"]


def _mask(ty: str) -> str:
    return f"<{ty[1:].split(' x ')[0]} x i1>" if ty.startswith("<") else "i1"


def _loop(name: str, ty: str, element: str, lanes: int, parts: int, outs: int, op: str,
          kind: str, start: str, stop: str, after: str, nontemporal: bool) -> list[str]:
    """A loop over [start, stop) of `ty` values (element type `element`), `lanes` per step."""
    align = VECTOR_BYTES if nontemporal else 1
    meta = ", !nontemporal !0" if nontemporal else ""
    lines = [f"{name}.head:",
             f"  %{name}.i = phi i64 [{start}, %{name}.pre], [%{name}.next, %{name}.body]",
             f"  %{name}.more = icmp slt i64 %{name}.i, {stop}",
             f"  br i1 %{name}.more, label %{name}.body, label %{after}",
             f"{name}.body:"]
    acc = None
    for k in range(parts):
        ptr = f"%{name}.p{k}"
        lines += [f"  {ptr}.a = getelementptr {element}, {element}* %part{k}, i64 %{name}.i",
                  f"  {ptr}.v = bitcast {element}* {ptr}.a to {ty}*",
                  f"  {ptr} = load {ty}, {ty}* {ptr}.v, align 1"]
        if acc is None:
            acc = ptr
        else:
            lines += ["  " + line for line in _combine(op, kind, ty, acc, ptr, f"%{name}.acc{k}")]
            acc = f"%{name}.acc{k}"
    for j in range(outs):
        ptr = f"%{name}.o{j}"
        lines += [f"  {ptr}.a = getelementptr {element}, {element}* %out{j}, i64 %{name}.i",
                  f"  {ptr} = bitcast {element}* {ptr}.a to {ty}*",
                  f"  store {ty} {acc}, {ty}* {ptr}, align {align}{meta}"]
    lines += [f"  %{name}.next = add i64 %{name}.i, {lanes}",
              f"  br label %{name}.head"]
    return lines


def fold_ir(op: str, dtype: np.dtype, parts: int, outs: int, nontemporal: bool) -> str:
    """The LLVM module (text) of one fold (module docstring)."""
    element = _TYPES[dtype.str[1:]]
    kind = dtype.kind
    lanes = VECTOR_BYTES // dtype.itemsize
    vector = f"<{lanes} x {element}>"
    lines = ["define void @fold(i8** %parts, i8** %outs, i64 %begin, i64 %vbegin, "
             "i64 %vend, i64 %end) {", "entry:"]
    for name, count in (("part", parts), ("out", outs)):
        for k in range(count):
            lines += [f"  %{name}{k}.slot = getelementptr i8*, i8** %{name}s, i64 {k}",
                      f"  %{name}{k}.raw = load i8*, i8** %{name}{k}.slot",
                      f"  %{name}{k} = bitcast i8* %{name}{k}.raw to {element}*"]
    lines += ["  br label %head.pre", "head.pre:", "  br label %head.head"]
    lines += _loop("head", element, element, 1, parts, outs, op, kind, "%begin", "%vbegin",
                   "mid.pre", False)
    lines += ["mid.pre:", "  br label %mid.head"]
    lines += _loop("mid", vector, element, lanes, parts, outs, op, kind, "%vbegin", "%vend",
                   "tail.pre", nontemporal)
    lines += ["tail.pre:", "  br label %tail.head"]
    lines += _loop("tail", element, element, 1, parts, outs, op, kind, "%vend", "%end",
                   "exit", False)
    # Non-temporal stores are weakly ordered: fence them before the caller's barrier.
    lines += ["exit:", "  fence seq_cst" if nontemporal else "", "  ret void", "}",
              "!0 = !{i32 1}"]
    return "\n".join(lines) + "\n"


def provide(op: str, dtype: np.dtype, parts: int, outs: int, nontemporal: bool):
    """runtime.set_native_folds' provider: a ctypes function, or None for numpy's path."""
    return build(op, dtype, parts, outs, nontemporal)


def build(op: str, dtype: np.dtype, parts: int, outs: int, nontemporal: bool, target=None):
    """The fold compiled for `target` (default: the current one), or None where numpy's
    path serves."""
    dtype = np.dtype(dtype)
    if dtype.str[1:] not in _TYPES or dtype.kind not in "fiu" or parts < 1 or outs < 1:
        return None
    if op in ("and", "or") and dtype.kind == "f":
        return None
    if op not in ("sum", "prod", "min", "max", "and", "or"):
        return None
    (code,) = machine_code.compile_objects([fold_ir(op, dtype, parts, outs, nontemporal)],
                                           threads=1, target=target)
    jit = machine_code.jit_object(code)
    _kept.append(jit)
    return _SIGNATURE(jit.lookup("fold"))
