"""The custom-call targets we compute, what they mean, and the refusal of the rest.

A custom-call names a routine by `custom_call_target`; its meaning lives in the
backend that registered the name. We compute the targets that XLA's CPU backend
knows itself and that appear in its optimized modules and tests, and refuse every
other one with one line ("unsupported custom-call target 'X'"), in the evaluator
and in the backend alike:

- annotations that pass their one operand through unchanged: the sharding marks
  (`Sharding`, `SPMDFullToShardShape`, `SPMDShardToFullShape`, Shardy's
  `xla.sdy.Sharding` / `xla.sdy.FuncResultSharding`), which on one device change
  nothing, and the memory-placement marks of host offloading (`MoveToHost`,
  `MoveToDevice`, `PinToDevice`, `annotate_device_placement`), which on a CPU
  move nothing (host and device memory are one). A mark whose result shape
  differs from its operand's (a manual sharding that really splits) is refused.
- `AllocateBuffer`: a buffer of the result's shape with no operands, whose contents
  XLA leaves undefined (a loop slot nothing reads before writing); we give zeros.
- `TopK` (XLA's TopkRewriter; the CPU runtime's TopK routine): x[..., n] ->
  (values[..., k], s32 indices[..., k]), the k largest of each row, ties by the
  lower index. The comparator it may carry (`to_apply`) says which end: a plain
  `compare(p0, p1)` GT/GE is the largest, LT/LE the smallest.
- the oneDNN targets of XLA's CPU rewriters, with their `backend_config` (JSON, as
  XLA prints the BackendConfig proto):
  - `__onednn$matmul`: lhs [..., M, K] x rhs [..., K, N] (`transpose_a` /
    `transpose_b` swap the two minor dimensions first; batch dimensions broadcast
    where one side has size 1 or fewer dimensions), accumulated in f32, then the
    fused ops of `fusions.ops` (or the older `fused_ops`) in order: BIAS and
    BINARY_ADD add the next extra operand (broadcast numpy-style from the minor
    end), RELU, TANH, GELU_ERF, GELU_TANH, ELU, RELU6, SIGMOID, SWISH act
    elementwise, LINEAR multiplies by `alpha_typecast` (an f32's bits as an
    int32); the result is converted to the custom-call's type.
  - `__onednn$softmax`: softmax along `softmax_axis` (proto3 omits a zero: 0).
  - `__onednn$layernorm`: over the minor dimension,
    (x - mean) / sqrt(var + eps) [* scale] [+ shift], `rescale` saying which of
    scale and shift follow x as operands (SCALE, SHIFT, SCALE_AND_SHIFT),
    eps an f32's bits in `epsilon_typecast`.
  - `__onednn$convolution`: the convolution its own `window`, `dim_labels` and
    group counts describe (the attributes of the convolution it replaced),
    accumulated in f32, then the fused ops as for the matmul, except that a
    rank-1 BIAS of the output feature count is added along the output feature
    dimension (any other addend broadcasts numpy-style).
  These four are defined as HLO: `expansion(instr)` builds a computation of
  ordinary ops on the custom-call's operands, which the evaluator calls and the
  CPU backend compiles as a called computation, so both compute the same thing.

Dynamic-shape helpers (`SliceToDynamic`, `PadToStatic`) make or take dynamic
dimensions, which nothing here computes with (docs/hlo.md): they are refused
with that reason. `__onednn$matmul_reorder` (a weight-layout cache) is refused
by name like any other target.
"""
from __future__ import annotations

import json
import math
import struct

from .builder import HloBuilder
from .ir import HloComputation, HloInstruction, RawAttr
from .shape import Shape

IDENTITY_TARGETS = frozenset({
    "Sharding", "xla.sdy.Sharding", "xla.sdy.FuncResultSharding",
    "SPMDFullToShardShape", "SPMDShardToFullShape",
    "MoveToHost", "MoveToDevice", "PinToDevice", "annotate_device_placement"})
ONEDNN_TARGETS = frozenset({"__onednn$matmul", "__onednn$softmax", "__onednn$layernorm",
                            "__onednn$convolution"})
DYNAMIC_TARGETS = frozenset({"SliceToDynamic", "PadToStatic"})
KNOWN_TARGETS = IDENTITY_TARGETS | ONEDNN_TARGETS | {"TopK", "AllocateBuffer"}

# OneDnnFusionConfig.FusionKind, by number as well (a JSON printer may write either).
_FUSION_KINDS = {1: "BIAS", 2: "RELU", 3: "TANH", 4: "GELU_ERF", 5: "GELU_TANH",
                 6: "BINARY_ADD", 7: "LINEAR"}
_OPERAND_OPS = frozenset({"BIAS", "BINARY_ADD"})
_ACTIVATIONS = frozenset({"RELU", "TANH", "GELU_ERF", "GELU_TANH", "ELU", "RELU6",
                          "SIGMOID", "SWISH", "LINEAR"})
_RESCALE = {0: "UNDEFINED", 1: "SCALE", 2: "SHIFT", 3: "SCALE_AND_SHIFT"}
_FLOATS = frozenset({"f16", "bf16", "f32", "f64"})


class CustomCallError(ValueError):
    """A custom-call we do not compute; the message is one line."""


def target_of(instr: HloInstruction) -> str:
    return instr.attrs.get("custom_call_target", "?")


def refusal(instr: HloInstruction) -> str | None:
    """The one-line reason we do not compute this custom-call, else None."""
    try:
        check(instr)
    except CustomCallError as e:
        return str(e)
    return None


def check(instr: HloInstruction) -> None:
    """Raises CustomCallError unless the custom-call is one we compute (docstring)."""
    target = target_of(instr)
    if target in DYNAMIC_TARGETS:
        raise CustomCallError(f"custom-call {target!r} makes or takes dynamic dimensions, "
                              f"which are refused (only static shapes compute)")
    if target not in KNOWN_TARGETS:
        raise CustomCallError(f"unsupported custom-call target {target!r}")
    if target in IDENTITY_TARGETS:
        if len(instr.operands) != 1 or instr.operands[0].shape != instr.shape:
            raise CustomCallError(f"custom-call {target!r} changes the shape "
                                  f"(one device has nothing to split)")
    elif target == "TopK":
        topk_largest(instr)
    elif target == "AllocateBuffer":
        if instr.operands or not all(leaf.is_array for leaf in instr.shape.leaves()):
            raise CustomCallError("custom-call 'AllocateBuffer' takes no operands and makes "
                                  "arrays")
    else:
        expansion(instr)            # builds it: a config or shape that does not fit fails


# --- TopK -------------------------------------------------------------------------------

def topk_largest(instr: HloInstruction) -> bool:
    """True for the k largest, False for the k smallest; CustomCallError if the call
    does not fit x[..., n] -> (values[..., k], s32 indices[..., k])."""
    if not _topk_fits(instr):
        raise CustomCallError("custom-call 'TopK' must map x[..., n] to "
                              "(values[..., k], s32 indices[..., k])")
    comparator = instr.attrs.get("to_apply")
    if comparator is None:
        return True
    root = comparator.root
    params = comparator.parameters
    if root.opcode == "compare" and len(params) == 2 and list(root.operands) in (
            [params[0], params[1]], [params[1], params[0]]):
        direction = root.attrs["direction"]
        if direction in ("GT", "GE", "LT", "LE"):
            larger = direction in ("GT", "GE")
            return larger if root.operands[0] is params[0] else not larger
    raise CustomCallError("custom-call 'TopK': its comparator must be one compare of "
                          "its two parameters (GT/GE: largest, LT/LE: smallest)")


def _topk_fits(instr) -> bool:
    if len(instr.operands) != 1 or not instr.shape.is_tuple or len(instr.shape.tuple_shapes) != 2:
        return False
    x = instr.operands[0].shape
    values, indices = instr.shape.tuple_shapes
    return (x.is_array and x.rank >= 1 and values.is_array and indices.is_array
            and values.element_type == x.element_type
            and values.dims[:-1] == x.dims[:-1] and values.dims == indices.dims
            and indices.element_type == "s32" and values.rank == x.rank
            and values.dims[-1] <= x.dims[-1])


# --- backend_config ---------------------------------------------------------------------

def backend_config(instr: HloInstruction) -> dict:
    """The custom-call's backend_config as a dict ({} when absent or empty)."""
    raw = instr.attrs.get("backend_config")
    if raw is None:
        return {}
    text = raw.text if isinstance(raw, RawAttr) else str(raw)
    text = text.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':     # a quoted string
        try:
            text = json.loads(text)
        except ValueError:
            text = text[1:-1]
    if not text.strip():
        return {}
    try:
        config = json.loads(text)
    except ValueError:
        raise CustomCallError(f"custom-call {target_of(instr)!r}: backend_config is not "
                              f"JSON: {text[:60]!r}") from None
    if not isinstance(config, dict):
        raise CustomCallError(f"custom-call {target_of(instr)!r}: backend_config is not "
                              f"a JSON object")
    return config


def _field(message: dict, name: str, default=None):
    """A proto field by its JSON name (snake_case as XLA prints, or lowerCamelCase)."""
    if name in message:
        return message[name]
    parts = name.split("_")
    camel = parts[0] + "".join(p.title() for p in parts[1:])
    return message.get(camel, default)


def _sub_config(instr, name: str) -> dict:
    config = _field(backend_config(instr), name, {}) or {}
    if not isinstance(config, dict):
        raise CustomCallError(f"custom-call {target_of(instr)!r}: {name} is not an object")
    return config


def _f32_from_bits(value, instr, name: str) -> float:
    try:
        bits = int(value)
    except (TypeError, ValueError):
        raise CustomCallError(f"custom-call {target_of(instr)!r}: {name} must be an "
                              f"integer (an f32's bits), got {value!r}") from None
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _enum(value, table: dict, instr, what: str) -> str:
    if isinstance(value, int) and value in table:
        return table[value]
    if isinstance(value, str):
        return value
    raise CustomCallError(f"custom-call {target_of(instr)!r}: {what} {value!r} is not known")


# --- the oneDNN targets as HLO ------------------------------------------------------------

def expansion(instr: HloInstruction) -> HloComputation:
    """A computation of ordinary ops computing the custom-call `instr` (one of
    ONEDNN_TARGETS) from parameters shaped like its operands."""
    target = target_of(instr)
    builders = {"__onednn$matmul": _matmul, "__onednn$softmax": _softmax,
                "__onednn$layernorm": _layernorm, "__onednn$convolution": _convolution}
    if target not in builders:
        raise CustomCallError(f"unsupported custom-call target {target!r}")
    if not instr.shape.is_array or instr.shape.element_type not in _FLOATS:
        raise CustomCallError(f"custom-call {target!r}: the result must be a floating-point "
                              f"array, not {instr.shape}")
    for o in instr.operands:
        if not o.shape.is_array or o.shape.element_type not in _FLOATS:
            raise CustomCallError(f"custom-call {target!r}: operand {o.name} must be a "
                                  f"floating-point array, not {o.shape}")
    b = HloBuilder(f"{instr.name}.expansion")
    params = [b.parameter(o.shape, f"{instr.name}.arg{i}") for i, o in enumerate(instr.operands)]
    calc = "f64" if any(o.shape.element_type == "f64" for o in instr.operands) else "f32"
    result = builders[target](b, instr, params, calc)
    if result.shape.dims != instr.shape.dims:
        raise CustomCallError(f"custom-call {target!r}: the result is {instr.shape} but the "
                              f"operands give {result.shape.dims}")
    if result.shape.element_type != instr.shape.element_type:
        result = b.convert(result, instr.shape.element_type)
    return b.build(result)


def _widen(b: HloBuilder, x: HloInstruction, calc: str) -> HloInstruction:
    return x if x.shape.element_type == calc else b.convert(x, calc)


def _scalar(b: HloBuilder, value: float, calc: str, dims) -> HloInstruction:
    return b.broadcast(b.constant(value, calc), Shape(calc, tuple(dims)))


def _broadcast_to(b: HloBuilder, x: HloInstruction, dims: tuple, instr, what: str):
    """`x` broadcast numpy-style (aligned at the minor end; size-1 dims stretch) to dims."""
    have = x.shape.dims
    if have == tuple(dims):
        return x
    offset = len(dims) - len(have)
    if offset < 0 or any(h not in (1, dims[offset + i]) for i, h in enumerate(have)):
        raise CustomCallError(f"custom-call {target_of(instr)!r}: {what} {x.shape} does not "
                              f"broadcast to {list(dims)}")
    kept = [i for i, h in enumerate(have) if h == dims[offset + i]]
    if len(kept) != len(have):
        x = b.reshape(x, [have[i] for i in kept])
    return b.broadcast(x, Shape(x.shape.element_type, tuple(dims)), [offset + i for i in kept])


def _swap_minor(b: HloBuilder, x: HloInstruction) -> HloInstruction:
    perm = list(range(x.shape.rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return b.transpose(x, perm)


def _matmul(b: HloBuilder, instr, params, calc: str) -> HloInstruction:
    if len(params) < 2:
        raise CustomCallError("custom-call '__onednn$matmul' takes lhs, rhs and the fused "
                              "ops' operands")
    config = _sub_config(instr, "onednn_matmul_config")
    fusions = _field(config, "fusions", {}) or {}
    ops = _field(fusions, "ops", None) or _field(config, "fused_ops", []) or []
    ops = [_enum(op, _FUSION_KINDS, instr, "fused op") for op in ops]
    lhs, rhs = (_widen(b, p, calc) for p in params[:2])
    if lhs.shape.rank < 2 or rhs.shape.rank < 2:
        raise CustomCallError("custom-call '__onednn$matmul': lhs and rhs need two "
                              "dimensions at least (matrices)")
    if _field(config, "transpose_a", False):
        lhs = _swap_minor(b, lhs)
    if _field(config, "transpose_b", False):
        rhs = _swap_minor(b, rhs)
    (m, k), (k2, n) = lhs.shape.dims[-2:], rhs.shape.dims[-2:]
    if k != k2:
        raise CustomCallError(f"custom-call '__onednn$matmul': lhs {lhs.shape} and rhs "
                              f"{rhs.shape} disagree on the contracted size")
    batch = tuple(instr.shape.dims[:-2])
    if rhs.shape.rank == 2 and lhs.shape.dims[:-2] == batch:
        # [..., M, K] x [K, N]: one dot without batch dimensions, free dims in order.
        out = b.dot(lhs, rhs, [lhs.shape.rank - 1], [0], result_type=calc)
    else:
        lhs = _broadcast_to(b, lhs, batch + (m, k), instr, "lhs")
        rhs = _broadcast_to(b, rhs, batch + (k, n), instr, "rhs")
        nb = len(batch)
        out = b.dot(lhs, rhs, [nb + 1], [nb], list(range(nb)), list(range(nb)),
                    result_type=calc)
    extra = list(params[2:])
    alpha = _f32_from_bits(_field(fusions, "alpha_typecast", 0), instr, "alpha_typecast")
    for op in ops:
        if op in _OPERAND_OPS:
            if not extra:
                raise CustomCallError(f"custom-call '__onednn$matmul': fused op {op} needs "
                                      f"an operand and none is left")
            addend = _broadcast_to(b, _widen(b, extra.pop(0), calc), out.shape.dims, instr,
                                   f"the {op} operand")
            out = b.add(out, addend)
        elif op in _ACTIVATIONS:
            out = _activation(b, op, out, calc, alpha)
        else:
            raise CustomCallError(f"custom-call '__onednn$matmul': fused op {op!r} is not "
                                  f"supported")
    if extra:
        raise CustomCallError(f"custom-call '__onednn$matmul': {len(extra)} operand(s) "
                              f"beyond what the fused ops {ops} take")
    return out


def _convolution(b: HloBuilder, instr, params, calc: str) -> HloInstruction:
    name = "custom-call '__onednn$convolution'"
    if len(params) < 2:
        raise CustomCallError(f"{name} takes input, filter and the fused ops' operands")
    labels, window = instr.attrs.get("dim_labels"), instr.attrs.get("window")
    if not isinstance(labels, str) or window is None:
        raise CustomCallError(f"{name} needs the convolution's window= and dim_labels= "
                              f"attributes")
    config = _sub_config(instr, "onednn_conv_config")
    fusions = _field(config, "fusions", {}) or {}
    ops = [_enum(op, _FUSION_KINDS, instr, "fused op") for op in _field(fusions, "ops", []) or []]
    attrs = {"window": window, "dim_labels": labels}
    for key in ("feature_group_count", "batch_group_count"):
        if key in instr.attrs:
            attrs[key] = instr.attrs[key]
    lhs, rhs = (_widen(b, p, calc) for p in params[:2])
    try:
        out = b.op("convolution", [lhs, rhs], **attrs)
    except ValueError as e:
        raise CustomCallError(f"{name}: {e}") from None
    feature = labels.split("->")[1].index("f")
    extra = list(params[2:])
    alpha = _f32_from_bits(_field(fusions, "alpha_typecast", 0), instr, "alpha_typecast")
    for op in ops:
        if op in _OPERAND_OPS:
            if not extra:
                raise CustomCallError(f"{name}: fused op {op} needs an operand and none is left")
            addend = _widen(b, extra.pop(0), calc)
            if op == "BIAS" and addend.shape.dims == (out.shape.dims[feature],):
                addend = b.broadcast(addend, out.shape, [feature])
            else:
                addend = _broadcast_to(b, addend, out.shape.dims, instr, f"the {op} operand")
            out = b.add(out, addend)
        elif op in _ACTIVATIONS:
            out = _activation(b, op, out, calc, alpha)
        else:
            raise CustomCallError(f"{name}: fused op {op!r} is not supported")
    if extra:
        raise CustomCallError(f"{name}: {len(extra)} operand(s) beyond what the fused ops "
                              f"{ops} take")
    return out


def _activation(b: HloBuilder, op: str, x: HloInstruction, calc: str, alpha: float):
    dims = x.shape.dims
    c = lambda v: _scalar(b, v, calc, dims)                               # noqa: E731
    if op == "RELU":
        return b.max(x, c(0.0))
    if op == "RELU6":
        return b.clamp(c(0.0), x, c(6.0))
    if op == "TANH":
        return b.tanh(x)
    if op == "SIGMOID":
        return b.logistic(x)
    if op == "SWISH":
        return b.mul(x, b.logistic(x))
    if op == "ELU":                   # x > 0 ? x : exp(x) - 1
        return b.select(b.compare(x, c(0.0), "GT"), x, b.exponential_minus_one(x))
    if op == "LINEAR":
        return b.mul(x, c(alpha))
    if op == "GELU_ERF":              # x/2 (1 + erf(x / sqrt 2))
        return b.mul(b.mul(x, c(0.5)), b.add(c(1.0), b.erf(b.mul(x, c(math.sqrt(0.5))))))
    # GELU_TANH: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    cube = b.mul(b.mul(x, x), x)
    inner = b.mul(c(math.sqrt(2.0 / math.pi)), b.add(x, b.mul(c(0.044715), cube)))
    return b.mul(b.mul(x, c(0.5)), b.add(c(1.0), b.tanh(inner)))


def _reduce(b: HloBuilder, x: HloInstruction, axis: int, opcode: str, init: float, calc: str):
    reducer = b.scalar_computation(f"{opcode}_{calc}", opcode, calc)
    return b.reduce(x, b.constant(init, calc), [axis], reducer)


def _softmax(b: HloBuilder, instr, params, calc: str) -> HloInstruction:
    if len(params) != 1:
        raise CustomCallError("custom-call '__onednn$softmax' takes one operand")
    x = _widen(b, params[0], calc)
    axis = _field(_sub_config(instr, "onednn_softmax_config"), "softmax_axis", 0)
    if not isinstance(axis, int) or not 0 <= axis < max(x.shape.rank, 1) or x.shape.rank == 0:
        raise CustomCallError(f"custom-call '__onednn$softmax': softmax_axis {axis!r} is not "
                              f"a dimension of {x.shape}")
    dims = x.shape.dims
    keep = [d for d in range(len(dims)) if d != axis]
    peak = b.broadcast(_reduce(b, x, axis, "maximum", -math.inf, calc), x.shape.with_dims(dims),
                       keep)
    e = b.exp(b.sub(x, peak))
    total = b.broadcast(_reduce(b, e, axis, "add", 0.0, calc), e.shape, keep)
    return b.div(e, total)


def _layernorm(b: HloBuilder, instr, params, calc: str) -> HloInstruction:
    config = _sub_config(instr, "onednn_layer_norm_config")
    rescale = _enum(_field(config, "rescale", 0), _RESCALE, instr, "rescale")
    takes = {"UNDEFINED": (), "SCALE": ("scale",), "SHIFT": ("shift",),
             "SCALE_AND_SHIFT": ("scale", "shift")}
    if rescale not in takes:
        raise CustomCallError(f"custom-call '__onednn$layernorm': rescale {rescale!r} is not "
                              f"known")
    if len(params) != 1 + len(takes[rescale]):
        raise CustomCallError(f"custom-call '__onednn$layernorm' with rescale {rescale} takes "
                              f"{1 + len(takes[rescale])} operands, not {len(params)}")
    eps = _f32_from_bits(_field(config, "epsilon_typecast", 0), instr, "epsilon_typecast")
    x = _widen(b, params[0], calc)
    if x.shape.rank == 0:
        raise CustomCallError("custom-call '__onednn$layernorm' needs an array operand")
    dims, axis = x.shape.dims, x.shape.rank - 1
    keep = list(range(axis))
    count = _scalar(b, float(dims[axis]), calc, dims[:-1])
    mean = b.div(_reduce(b, x, axis, "add", 0.0, calc), count)
    centered = b.sub(x, b.broadcast(mean, x.shape, keep))
    var = b.div(_reduce(b, b.mul(centered, centered), axis, "add", 0.0, calc), count)
    inv = b.rsqrt(b.add(var, _scalar(b, eps, calc, dims[:-1])))
    out = b.mul(centered, b.broadcast(inv, x.shape, keep))
    for name, p in zip(takes[rescale], params[1:]):
        factor = _broadcast_to(b, _widen(b, p, calc), dims, instr, name)
        out = b.mul(out, factor) if name == "scale" else b.add(out, factor)
    return out


__all__ = ["CustomCallError", "DYNAMIC_TARGETS", "IDENTITY_TARGETS", "KNOWN_TARGETS",
           "ONEDNN_TARGETS", "backend_config", "check", "expansion", "refusal", "target_of",
           "topk_largest"]
