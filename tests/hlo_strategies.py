"""Hypothesis strategies for random *valid* HLO modules and arguments for them.

`hlo_modules()` draws a module: a DAG of 1-40 instructions built with
`hlo.HloBuilder` over elementwise unary/binary/compare/select/clamp/convert
ops in every real element type, broadcast, reshape, transpose, slice,
concatenate, pad, reverse, iota, reduce, reduce-window, dot, dynamic-slice,
gather, sort, and `while`/`conditional` with small trip counts (parameters
sometimes carry non-default layouts). Shapes are small and include
scalars and size-0 and size-1 dimensions; constants include NaN, +-inf, +-0,
denormals, the integer extremes and the largest finite floats. Every module
passes `hlo.verify` (the strategy asserts it, so a bug here is loud).

`hlo_cases()` draws `(module, args)`: the module plus numpy arguments for its
ENTRY parameters, drawn from the same special values.

    @given(hlo_cases(GenOptions(transcendental=False)))
    def test_something(case):
        module, args = case

`GenOptions` narrows what is drawn: `transcendental=False` keeps only ops that
IEEE arithmetic rounds correctly (add, divide, sqrt, ...), so two correct
implementations give the same bits; `float_sums=False` also leaves out float
sums and dots (their rounding depends on the order of the terms), so every
value may then be drawn, extremes included; `control_flow=False` leaves out
while and conditional. The generator itself lives in `tests/robustness/hlo_gen.py` (one method per op
family); this module holds the value tables and the public strategies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from xlapy.hlo import OPCODES, numpy_dtype
from xlapy.hlo.opcodes import transcendental_opcodes

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
SIGNED_TYPES = ("s8", "s16", "s32", "s64")
UNSIGNED_TYPES = ("u8", "u16", "u32", "u64")
INT_TYPES = SIGNED_TYPES + UNSIGNED_TYPES
ALL_TYPES = ("pred",) + INT_TYPES + FLOAT_TYPES

# --- opcodes by operand family ("f" float, "i" integer, "b" pred) ---------------------------
EXACT_FLOAT_UNARY = ("abs", "negate", "sign", "floor", "ceil", "round-nearest-afz",
                     "round-nearest-even", "is-finite", "sqrt", "copy")
# The opcodes the table flags transcendental (sqrt aside: IEEE rounds it correctly). Their
# results are approximations: two correct implementations may differ in the last bits,
# and later ops can magnify that (exp(a) - exp(b)); see GenOptions.
TRANSCENDENTAL_UNARY = tuple(op for op in transcendental_opcodes()
                             if OPCODES[op].arity == 1 and op not in EXACT_FLOAT_UNARY)
TRANSCENDENTAL_BINARY = tuple(op for op in transcendental_opcodes() if OPCODES[op].arity == 2)
UNARY = {
    "f": EXACT_FLOAT_UNARY,
    "i": ("abs", "negate", "sign", "not", "popcnt", "count-leading-zeros", "copy"),
    "b": ("not", "copy"),
}
BINARY = {
    "f": ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum"),
    "i": ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
          "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical"),
    "b": ("and", "or", "xor", "maximum", "minimum"),
}
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
# Reducers with their identity: a non-identity init is applied an unspecified
# number of times by XLA, so only identities give a defined result.
REDUCERS = {"f": ("add", "multiply", "maximum", "minimum"),
            "i": ("add", "multiply", "maximum", "minimum", "and", "or", "xor"),
            "b": ("and", "or")}


def family(element_type: str) -> str:
    if element_type == "pred":
        return "b"
    return "f" if element_type in FLOAT_TYPES else "i"


def reducer_identity(opcode: str, element_type: str):
    np_type = numpy_type(element_type)
    if element_type == "pred":
        return np.bool_(opcode == "and")
    if opcode in ("add", "or", "xor"):
        return np_type.type(0)
    if opcode == "multiply":
        return np_type.type(1)
    if opcode == "and":
        return np_type.type(-1) if element_type in SIGNED_TYPES else np.iinfo(np_type).max
    lowest = opcode == "maximum"
    if element_type in FLOAT_TYPES:
        return np_type.type(-np.inf if lowest else np.inf)
    info = np.iinfo(np_type)
    return np_type.type(info.min if lowest else info.max)


def numpy_type(element_type: str) -> np.dtype:
    """The numpy dtype holding `element_type` (bf16: ml_dtypes.bfloat16, as in `hlo`)."""
    return numpy_dtype(element_type)


def _draw_type(element_type: str) -> np.dtype:
    """The dtype values are drawn in: bf16 values are drawn as float32 (hypothesis
    knows no bfloat16), all exactly representable in bf16, and converted at the end."""
    return np.dtype(np.float32) if element_type == "bf16" else numpy_type(element_type)


# --- special values -------------------------------------------------------------------------

def _to_bf16(values) -> np.ndarray:
    """float32 values truncated to bf16 precision (the low 16 bits cleared)."""
    bits = np.asarray(values, np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def special_values(element_type: str) -> list:
    """The edge cases of a type: NaN, +-inf, +-0, a denormal, extremes, and a few small ones."""
    if element_type == "pred":
        return [np.bool_(False), np.bool_(True)]
    np_type = numpy_type(element_type)
    if element_type in INT_TYPES:
        info = np.iinfo(np_type)
        values = {info.min, info.max, 0, 1, 2, 3, 7, info.max - 1, info.bits, info.bits - 1}
        if info.min < 0:
            values |= {-1, -2, info.min + 1}
        return [np_type.type(v) for v in sorted(values)]
    if element_type == "bf16":
        finfo = np.finfo(np.float32)
        raw = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5,
               float(finfo.max), -float(finfo.max), 1e-39, -1e-39, 1.2e-38]
        return list(_to_bf16(raw))
    finfo = np.finfo(np_type)
    denormal = finfo.smallest_subnormal
    raw = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 100.0,
           finfo.max, -finfo.max, finfo.tiny, denormal, -denormal, denormal * 3]
    return [np_type.type(v) for v in raw]


def element_strategy(element_type: str, exact_sums: bool = False) -> st.SearchStrategy:
    """One element: mostly small "friendly" numbers, often a special value.

    `exact_sums` keeps floats to multiples of 1/4 below 64 (plus NaN, inf, +-0 and
    denormals): sums and products of a few of them are exact in every float type,
    so a reduction or dot gives the same bits in any association order.
    """
    if element_type == "pred":
        return st.booleans().map(np.bool_)
    np_type = _draw_type(element_type)
    specials = special_values(element_type)
    if element_type in INT_TYPES:
        info = np.iinfo(np_type)
        return st.one_of(st.sampled_from(specials), st.integers(max(-8, int(info.min)), 8).map(np_type.type),
            st.integers(int(info.min), int(info.max)).map(np_type.type))
    friendly = st.integers(-255, 255).map(lambda q: np_type.type(q / 4))
    if exact_sums:
        nonfinite = [v for v in specials if not np.isfinite(v) or abs(v) < 1e-30]
        return st.one_of(friendly, friendly, st.sampled_from(nonfinite))
    width = {"f16": 16, "f32": 32, "bf16": 32, "f64": 64}[element_type]
    anything = st.floats(width=width, allow_nan=True, allow_infinity=True).map(np_type.type)
    if element_type == "bf16":
        anything = anything.map(lambda v: _to_bf16([v])[0])
    return st.one_of(friendly, st.sampled_from(specials), anything)


def arrays(element_type: str, dims: tuple[int, ...], exact_sums: bool = False):
    """A numpy array of `element_type` and `dims` drawn from `element_strategy`."""
    from hypothesis.extra import numpy as hnp
    drawn = hnp.arrays(_draw_type(element_type), dims,
                       elements=element_strategy(element_type, exact_sums), fill=st.nothing())
    if element_type == "bf16":
        return drawn.map(lambda a: a.astype(numpy_type("bf16")))
    return drawn


# --- the public strategies ------------------------------------------------------------------

@dataclass(frozen=True)
class GenOptions:
    """What the generator may draw (the defaults: everything)."""
    max_instructions: int = 40
    transcendental: bool = True      # exp, log, tanh, power, atan2, ...
    control_flow: bool = True        # while and conditional
    dtypes: tuple[str, ...] = ALL_TYPES
    exact_sums: bool = False         # float values whose sums are exact (see element_strategy)
    float_sums: bool = True          # float add/multiply reductions and float dots, whose
                                     # result depends on the order of the terms
    max_elements: int = 48           # per array


@st.composite
def hlo_modules(draw, options: GenOptions = GenOptions()):
    """A random valid HloModule (see the module docstring)."""
    from tests.robustness.hlo_gen import ModuleGenerator
    return ModuleGenerator(draw, options).generate()


@st.composite
def hlo_cases(draw, options: GenOptions = GenOptions()):
    """(module, args): a random module and arguments for its ENTRY parameters."""
    module = draw(hlo_modules(options))
    args = [draw(arrays(p.shape.element_type, p.shape.dims, options.exact_sums))
            for p in module.entry.parameters]
    return module, args
