"""The opcode table: every fact about an HLO opcode lives here.

One row per opcode gives its text spelling, arity, kind and the flags passes
and backends care about; a set of opcodes sharing a property (the
transcendental functions, say) is a flag on their rows, which every layer
reads, never a list of names kept elsewhere. Two more facts are attached by the modules that own them, so that
those modules stay readable on their own:

- `shape_rule(operand_shapes, attrs) -> Shape` — registered by `shape_inference.py`
  with `@shape_rule("add", ...)`;
- `ref(instr, operand_values, ctx) -> np.ndarray | tuple` — NumPy semantics for
  the evaluator and constant folding, registered by `evaluator.py` with
  `@reference("add", ...)`.

The parser, printer, verifier, evaluator, passes and backends all look opcodes
up here; none keeps its own list. `tests/hlo/test_opcodes.py` checks that every
row has a shape rule and a reference implementation.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

# Kinds. Elementwise kinds map operand element i to result element i.
ELEMENTWISE_KINDS = frozenset({"unary", "binary", "compare", "ternary", "convert"})


@dataclass
class OpInfo:
    name: str                     # text spelling: "add", "exponential"
    arity: int | None             # None = variadic
    kind: str                     # see ELEMENTWISE_KINDS; also "movement", "reduce",
                                  # "dot", "control", "leaf", "collective", "map",
                                  # "library" (a routine on the host), "other"
    commutative: bool = False
    expensive: bool = False       # fusion must not duplicate it freely
    side_effect: bool = False     # never removed, folded or merged
    float_only: bool = False      # operands must be floating point (or complex)
    reducer: bool = False         # a reduce whose computation is this op alone runs as
                                  # one operation per element (the evaluator's numpy
                                  # ufunc, the CPU backend's one flagged instruction)
    transcendental: bool = False  # a math function with no exact short recipe: backends
                                  # compute it with their vector-math routine (CPU:
                                  # backend_cpu/vecmath.py, one per opcode, f32 and f64),
                                  # cost analysis counts it as XLA's HloCostAnalysis does
    collective: bool = False      # exchanges data between devices (kind "collective"):
                                  # hlo/collectives.py says who talks to whom
    per_device: bool = False      # its value depends on the device that runs it (the
                                  # collectives, replica-id, partition-id): passes never
                                  # evaluate it at compile time, merge two of them or fuse it
    async_role: str | None = None  # "start" or "done" for the halves of an async
                                   # collective; `sync_op` names the op they split
    sync_op: str | None = None
    shape_rule: Callable | None = field(default=None, repr=False)
    ref: Callable | None = field(default=None, repr=False)

    @property
    def is_elementwise(self) -> bool:
        return self.kind in ELEMENTWISE_KINDS


def _rows():
    U, B, C = "unary", "binary", "collective"
    MATH = dict(transcendental=True, float_only=True)
    COLL = dict(collective=True, per_device=True)
    yield from [
        # --- elementwise unary -------------------------------------------------
        OpInfo("abs", 1, U),
        OpInfo("negate", 1, U),
        OpInfo("sign", 1, U),
        OpInfo("not", 1, U),
        OpInfo("popcnt", 1, U),
        OpInfo("count-leading-zeros", 1, U),
        OpInfo("floor", 1, U, float_only=True),
        OpInfo("ceil", 1, U, float_only=True),
        OpInfo("round-nearest-afz", 1, U, float_only=True),
        OpInfo("round-nearest-even", 1, U, float_only=True),
        OpInfo("is-finite", 1, U, float_only=True),
        OpInfo("exponential", 1, U, expensive=True, **MATH),
        OpInfo("exponential-minus-one", 1, U, expensive=True, **MATH),
        OpInfo("log", 1, U, expensive=True, **MATH),
        OpInfo("log-plus-one", 1, U, expensive=True, **MATH),
        OpInfo("sqrt", 1, U, **MATH),       # counted as XLA does; cheap: not expensive
        OpInfo("rsqrt", 1, U, **MATH),
        OpInfo("cbrt", 1, U, expensive=True, **MATH),
        OpInfo("sine", 1, U, expensive=True, **MATH),
        OpInfo("cosine", 1, U, expensive=True, **MATH),
        OpInfo("tan", 1, U, expensive=True, **MATH),
        OpInfo("tanh", 1, U, expensive=True, **MATH),
        OpInfo("logistic", 1, U, expensive=True, **MATH),
        OpInfo("erf", 1, U, expensive=True, **MATH),
        OpInfo("real", 1, U),
        OpInfo("imag", 1, U),
        OpInfo("copy", 1, U),
        # --- elementwise binary ------------------------------------------------
        OpInfo("add", 2, B, commutative=True, reducer=True),
        OpInfo("subtract", 2, B),
        OpInfo("multiply", 2, B, commutative=True, reducer=True),
        OpInfo("divide", 2, B),
        OpInfo("remainder", 2, B),
        OpInfo("maximum", 2, B, commutative=True, reducer=True),
        OpInfo("minimum", 2, B, commutative=True, reducer=True),
        OpInfo("power", 2, B, expensive=True, transcendental=True),  # integers: exact
        OpInfo("atan2", 2, B, expensive=True, **MATH),
        OpInfo("and", 2, B, commutative=True, reducer=True),
        OpInfo("or", 2, B, commutative=True, reducer=True),
        OpInfo("xor", 2, B, commutative=True),
        OpInfo("shift-left", 2, B),
        OpInfo("shift-right-arithmetic", 2, B),
        OpInfo("shift-right-logical", 2, B),
        OpInfo("complex", 2, B),
        OpInfo("compare", 2, "compare"),
        OpInfo("select", 3, "ternary"),
        OpInfo("clamp", 3, "ternary"),
        OpInfo("convert", 1, "convert"),
        OpInfo("bitcast-convert", 1, "convert"),
        # --- data movement -----------------------------------------------------
        OpInfo("broadcast", 1, "movement"),
        OpInfo("reshape", 1, "movement"),
        OpInfo("bitcast", 1, "movement"),
        OpInfo("transpose", 1, "movement"),
        OpInfo("slice", 1, "movement"),
        OpInfo("dynamic-slice", None, "movement"),
        OpInfo("dynamic-update-slice", None, "movement"),
        OpInfo("concatenate", None, "movement"),
        OpInfo("pad", 2, "movement"),
        OpInfo("reverse", 1, "movement"),
        OpInfo("iota", 0, "movement"),
        OpInfo("gather", 2, "movement"),
        OpInfo("scatter", None, "movement"),
        # --- reductions and friends -------------------------------------------
        OpInfo("reduce", None, "reduce"),
        OpInfo("reduce-window", None, "reduce"),
        OpInfo("select-and-scatter", 3, "reduce"),
        OpInfo("sort", None, "reduce", expensive=True),
        OpInfo("dot", None, "dot", expensive=True),   # 2, or more for a sparse dot
        OpInfo("convolution", 2, "dot", expensive=True),
        OpInfo("ragged-dot", 3, "library", expensive=True),
        # XLA's newest unary function: elementwise, but a host op here (no kernel
        # recipe and no vecmath routine, so not flagged transcendental), so
        # "library" keeps fusion away from it.
        OpInfo("sinh", 1, "library", expensive=True, float_only=True),
        # XLA's newest movement op (rotate along dimensions, or permute by constant
        # coordinates); a host op here.
        OpInfo("shuffle", 1, "library"),
        # --- leaves, tuples, control flow -------------------------------------
        OpInfo("parameter", 0, "leaf"),
        OpInfo("constant", 0, "leaf"),
        OpInfo("tuple", None, "control"),
        OpInfo("get-tuple-element", 1, "control"),
        OpInfo("call", None, "control"),
        OpInfo("fusion", None, "control"),
        OpInfo("while", 1, "control"),
        OpInfo("scan", None, "control"),
        OpInfo("conditional", None, "control"),
        OpInfo("opt-barrier", 1, "control"),
        OpInfo("custom-call", None, "other", side_effect=True),
        OpInfo("after-all", None, "other", side_effect=True),
        OpInfo("rng", None, "other", side_effect=True),
        OpInfo("rng-bit-generator", 1, "other", side_effect=True),
        OpInfo("rng-get-and-update-state", 0, "other", side_effect=True),
        # Transfers to another program or the host: parsed, verified and printed;
        # nothing here computes them (no peer, no host queue).
        OpInfo("send", 2, "other", side_effect=True),
        OpInfo("send-done", 1, "other", side_effect=True),
        OpInfo("recv", 1, "other", side_effect=True),
        OpInfo("recv-done", 1, "other", side_effect=True),
        OpInfo("infeed", 1, "other", side_effect=True),
        OpInfo("outfeed", 2, "other", side_effect=True),
        # --- library ops, randomness, scheduling (issue 17) ---------------------
        # Computed by numpy on the host in both the evaluator (eval_library.py,
        # eval_random.py) and the CPU backend (backend_cpu/library_ops.py).
        OpInfo("reduce-precision", 1, U, float_only=True),
        OpInfo("map", None, "map"),             # to_apply per element: not fused, a kernel
        OpInfo("stochastic-convert", 2, "library"),   # elementwise, but run on the host
        OpInfo("topk", 1, "library", expensive=True),
        OpInfo("cholesky", 1, "library", expensive=True, float_only=True),
        OpInfo("triangular-solve", 2, "library", expensive=True, float_only=True),
        OpInfo("fft", 1, "library", expensive=True),
        OpInfo("batch-norm-training", 3, "library", expensive=True, float_only=True),
        OpInfo("batch-norm-inference", 5, "library", expensive=True, float_only=True),
        OpInfo("batch-norm-grad", 5, "library", expensive=True, float_only=True),
        OpInfo("add-dependency", 2, "control"),
        OpInfo("domain", 1, "control"),
        # Generic async wrappers: run synchronously (-start computes, -done returns).
        OpInfo("async-start", None, "control", side_effect=True),
        OpInfo("async-update", 1, "control", side_effect=True),
        OpInfo("async-done", 1, "control", side_effect=True),
        OpInfo("copy-start", 1, "control", side_effect=True),
        OpInfo("copy-done", 1, "control", side_effect=True),
        OpInfo("partition-id", 0, "other", per_device=True),
        OpInfo("replica-id", 0, "other", per_device=True),
        # --- collectives (hlo/collectives.py, hlo/eval_collective.py) -----------
        # The async halves are ordered like side effects, as in XLA: the start
        # launches the exchange, the done waits for it; neither may be dropped alone.
        OpInfo("all-reduce", None, C, **COLL),
        OpInfo("all-gather", None, C, **COLL),
        OpInfo("reduce-scatter", None, C, **COLL),
        OpInfo("all-to-all", None, C, **COLL),
        OpInfo("ragged-all-to-all", 6, C, **COLL),
        OpInfo("collective-permute", None, C, **COLL),
        OpInfo("collective-broadcast", None, C, **COLL),
        *_async_pair("all-reduce"),
        *_async_pair("all-gather"),
        *_async_pair("collective-permute"),
    ]


def _async_pair(sync_op: str):
    flags = dict(collective=True, per_device=True, side_effect=True, sync_op=sync_op)
    return [OpInfo(f"{sync_op}-start", None, "collective", async_role="start", **flags),
            OpInfo(f"{sync_op}-done", 1, "collective", async_role="done", **flags)]


OPCODES: dict[str, OpInfo] = {op.name: op for op in _rows()}

# Attributes whose value names one called computation, and the one that names a list.
CALLED_COMPUTATION_ATTRS = ("to_apply", "calls", "condition", "body", "select", "scatter",
                            "true_computation", "false_computation")
CALLED_COMPUTATION_LIST_ATTRS = ("branch_computations",)


def info_of(instr) -> OpInfo:
    """The row that describes one instruction (`HloInstruction.info`).

    The same as `OPCODES[instr.opcode]` except for a `bitcast-convert` between
    element types of different widths: it is not elementwise (u64[2] -> u32[2,2]
    adds a minor dimension, u8[n,4] -> f32[n] consumes one), so it is described as
    a movement op, like XLA's `IsElementwise`. Passes and backends that ask
    `instr.info.is_elementwise` then never pass an output index through it unchanged.
    """
    info = OPCODES[instr.opcode]
    if instr.opcode == "bitcast-convert" and changes_width(instr):
        return _resizing_row(info)
    return info


def changes_width(instr) -> bool:
    """True for a bitcast-convert whose result element is wider or narrower than its operand's."""
    if not instr.operands or not instr.shape.is_array or not instr.operands[0].shape.is_array:
        return False
    return instr.operands[0].shape.dtype.bits != instr.shape.dtype.bits


_RESIZING: list[OpInfo] = []


def _resizing_row(base: OpInfo) -> OpInfo:
    # Built on first use (and again should a rule be registered later), so that it
    # carries the shape rule and reference registered on the base row.
    if not _RESIZING or _RESIZING[0].ref is not base.ref \
            or _RESIZING[0].shape_rule is not base.shape_rule:
        _RESIZING[:] = [replace(base, kind="movement")]
    return _RESIZING[0]


def opinfo(name: str) -> OpInfo:
    """The row for `name`; KeyError lists nothing (callers word their own error)."""
    return OPCODES[name]


def transcendental_opcodes() -> tuple[str, ...]:
    """The opcodes whose rows are flagged `transcendental`, in table order (read when
    called: a row registered at run time counts)."""
    return tuple(name for name, info in OPCODES.items() if info.transcendental)


def collective_opcodes() -> tuple[str, ...]:
    """The opcodes whose rows are flagged `collective`, in table order."""
    return tuple(name for name, info in OPCODES.items() if info.collective)


def is_elementwise(opcode: str) -> bool:
    info = OPCODES.get(opcode)
    return info is not None and info.is_elementwise


def shape_rule(*names: str):
    """Decorator: register the shape rule of the named opcodes."""
    def register(fn):
        for n in names:
            OPCODES[n].shape_rule = fn
        return fn
    return register


def reference(*names: str):
    """Decorator: register the NumPy semantics of the named opcodes."""
    def register(fn):
        for n in names:
            OPCODES[n].ref = fn
        return fn
    return register
