"""Neural-network functions (tf.nn names): activations, softmax, normalization,
losses, convolution and pooling."""
from __future__ import annotations

from .core import apply, apply_multi, promote, to_float, to_tensor, user_error
from .random import dropout  # noqa: F401  (tf.nn.dropout: ops.nn.dropout as TF spells it)


def _activation(op: str, doc: str, integers: bool = False):
    """A tf.nn activation; integer inputs keep their type only where `integers` (as in
    TensorFlow, whose relu and relu6 accept integers), else they become float32."""
    def fn(features, name=None):
        x = to_tensor(features) if integers else to_float(features)
        return apply(op, [x])
    fn.__name__ = op.lower()
    fn.__doc__ = doc
    return fn


relu = _activation("Relu", "max(x, 0); integers stay integers.", integers=True)
relu6 = _activation("Relu6", "min(max(x, 0), 6); integers stay integers.", integers=True)
elu = _activation("Elu", "x if x > 0 else exp(x) - 1.")
selu = _activation("Selu", "scale * elu with alpha (the self-normalizing constants).")
softplus = _activation("Softplus", "log(1 + exp(x)), computed without overflow.")


def silu(features, beta=1.0, name=None):
    """x * sigmoid(beta * x) (also called swish)."""
    return apply("Silu", [to_float(features)], beta=float(beta))


swish = silu


def leaky_relu(features, alpha=0.2, name=None):
    return apply("LeakyRelu", [to_float(features)], alpha=float(alpha))


def gelu(features, approximate=False, name=None):
    """x * Phi(x): exact with erf, or the tanh approximation."""
    return apply("Gelu", [to_float(features)], approximate=bool(approximate))


def softmax(logits, axis=None, name=None):
    """exp(x) / sum(exp(x)) along `axis` (None: the last)."""
    return apply("Softmax", [to_float(logits)], axis=-1 if axis is None else int(axis))


def log_softmax(logits, axis=None, name=None):
    return apply("LogSoftmax", [to_float(logits)], axis=-1 if axis is None else int(axis))


def bias_add(value, bias, data_format=None, name=None):
    """value + bias along the channel dim: the last (None, "N...C") or dim 1 ("NC...")."""
    fmt = "NHWC" if data_format is None or not str(data_format).startswith("NC") else "NCHW"
    return apply("BiasAdd", promote(value, bias), data_format=fmt)


def _norm_axis(axis):
    return int(axis) if isinstance(axis, int) else tuple(int(a) for a in axis)


def layer_norm(x, gamma=None, beta=None, axis=-1, epsilon=1e-3):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over `axis` (gamma=1, beta=0 if None).

    Not a TF function: the math of Keras's LayerNormalization, with its defaults
    (epsilon 1e-3)."""
    from .array import ones_like, zeros_like
    x = to_float(x)
    probe = _param_shape_probe(x, axis)
    gamma = ones_like(probe) if gamma is None else gamma
    beta = zeros_like(probe) if beta is None else beta
    return apply("LayerNorm", promote(x, gamma, beta), axis=_norm_axis(axis),
                 epsilon=float(epsilon))


def rms_norm(x, gamma=None, axis=-1, epsilon=1e-6):
    """x / sqrt(mean(x^2) + epsilon) * gamma over `axis` (gamma=1 if None); Keras's
    RMSNormalization's math and default epsilon."""
    from .array import ones_like
    x = to_float(x)
    gamma = ones_like(_param_shape_probe(x, axis)) if gamma is None else gamma
    return apply("RMSNorm", promote(x, gamma), axis=_norm_axis(axis), epsilon=float(epsilon))


def _param_shape_probe(x, axis):
    """A tensor with the shape of x's normalized dims (for default gamma/beta)."""
    from .array import fill
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return fill([x.shape[a] for a in axes], 0, dtype=x.dtype)


def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None):
    """Per-example -sum(labels * log_softmax(logits)) over the class axis."""
    logits = to_float(logits)
    logits, labels = promote(logits, labels)
    if axis not in (-1, logits.ndim - 1):
        raise user_error(ValueError, "softmax_cross_entropy_with_logits: only the last "
                                     "axis is supported")
    return apply_multi("SoftmaxCrossEntropyWithLogits", [logits, labels])[0]


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-example -log_softmax(logits)[label]; labels are class indices."""
    return apply_multi("SparseSoftmaxCrossEntropyWithLogits",
                       [to_float(logits), to_tensor(labels)])[0]


def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None, name=None):
    """NHWC input, HWIO filters; padding "SAME", "VALID" or explicit pairs."""
    return apply("Conv2D", promote(input, filters), strides=strides, padding=padding,
                 data_format=data_format, dilations=1 if dilations is None else dilations)


def depthwise_conv2d(input, filter, strides, padding, data_format=None, dilations=None,
                     name=None):
    """NHWC input, filter [KH, KW, C, multiplier] -> C * multiplier channels."""
    return apply("DepthwiseConv2dNative", promote(input, filter), strides=strides,
                 padding=padding, data_format=data_format or "NHWC",
                 dilations=1 if dilations is None else dilations)


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    return apply("MaxPool", [to_tensor(input)], ksize=ksize, strides=strides,
                 padding=padding, data_format=data_format)


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    return apply("AvgPool", [to_float(input)], ksize=ksize, strides=strides,
                 padding=padding, data_format=data_format)


# --- more activations and losses ---------------------------------------------------------------

def softsign(features, name=None):
    """x / (1 + |x|)."""
    from .math import UNARY_FUNCTIONS
    x = to_float(features)
    return x / (1.0 + UNARY_FUNCTIONS["abs"](x))


def crelu(features, axis=-1, name=None):
    """concat([relu(x), relu(-x)], axis)."""
    from .array import concat
    x = to_float(features)
    return concat([relu(x), relu(-x)], axis)


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Elementwise -labels log(sigmoid(logits)) - (1 - labels) log(1 - sigmoid(logits)),
    as max(x, 0) - x z + log1p(exp(-|x|)) (TF's stable form)."""
    from .math import UNARY_FUNCTIONS as U, maximum
    if labels is None or logits is None:
        raise user_error(ValueError, "sigmoid_cross_entropy_with_logits: labels and logits "
                                     "are required")
    x, z = promote(to_float(logits), labels)
    if x.shape != z.shape:
        raise user_error(ValueError, f"sigmoid_cross_entropy_with_logits: logits "
                                     f"{x.aval_text()} and labels {z.aval_text()} differ")
    return maximum(x, 0.0) - x * z + U["log1p"](U["exp"](-U["abs"](x)))


def weighted_cross_entropy_with_logits(labels, logits, pos_weight, name=None):
    """sigmoid cross-entropy with the positive term weighted by pos_weight:
    (1 - z) x + (1 + (q - 1) z) (log1p(exp(-|x|)) + max(-x, 0))."""
    from .math import UNARY_FUNCTIONS as U, maximum
    x, z = promote(to_float(logits), labels)
    log_weight = 1.0 + (pos_weight - 1.0) * z
    return (1.0 - z) * x + log_weight * (U["log1p"](U["exp"](-U["abs"](x))) +
                                         maximum(-x, 0.0))


# --- normalization ----------------------------------------------------------------------------

def moments(x, axes, shift=None, keepdims=False, name=None):
    """(mean, variance) of x over `axes` (the variance about the mean, treated as a
    constant inside it, as TF does); f16 inputs are computed in f32."""
    from .array import stop_gradient
    from .core import cast
    from .math import reduce_mean, squared_difference
    x = to_float(x)
    work = cast(x, "float32") if x.dtype.itemsize < 4 else x
    axes = [axes] if isinstance(axes, int) else list(axes)
    mean = reduce_mean(work, axes, keepdims=True)
    var = reduce_mean(squared_difference(work, stop_gradient(mean)), axes, keepdims=True)
    if not keepdims:
        from .array import squeeze
        mean, var = squeeze(mean, axes), squeeze(var, axes)
    return cast(mean, x.dtype), cast(var, x.dtype)


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """(x - mean) / sqrt(variance + epsilon) * scale + offset (offset and scale may be
    None), all broadcast."""
    from .math import UNARY_FUNCTIONS as U
    x = to_float(x)
    inv = U["rsqrt"](variance + variance_epsilon)
    if scale is not None:
        inv = inv * scale
    shift = -mean * inv if offset is None else offset - mean * inv
    return x * inv + shift


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001,
                     data_format="NHWC", is_training=True, name=None,
                     exponential_avg_factor=1.0):
    """tf.compat.v1.nn.fused_batch_norm on a 4-D x: (y, mean, variance). Training: the
    batch's statistics over N, H, W (the returned variance is the unbiased one; with
    exponential_avg_factor < 1 both are blended with the given running ones);
    inference: the given mean and variance."""
    from .array import reshape
    x = to_float(x)
    if x.ndim != 4 or data_format not in ("NHWC", "NCHW"):
        raise user_error(ValueError, f"fused_batch_norm: x must be 4-D NHWC or NCHW, got "
                                     f"{x.aval_text()} {data_format}")
    c_axis = 3 if data_format == "NHWC" else 1
    axes = [d for d in range(4) if d != c_axis]
    view = [x.shape[c_axis] if d == c_axis else 1 for d in range(4)]

    def channel(v):
        return reshape(v, view)

    if is_training:
        batch_mean, batch_var = moments(x, axes)
        n = x.size // max(x.shape[c_axis], 1)
        unbiased = batch_var * (n / max(n - 1, 1))
        y = batch_normalization(x, channel(batch_mean), channel(batch_var), channel(offset),
                                channel(scale), epsilon)
        f = float(exponential_avg_factor)
        if f != 1.0:
            if mean is None or variance is None:
                raise user_error(ValueError, "fused_batch_norm: exponential_avg_factor < 1 "
                                             "needs the running mean and variance")
            batch_mean = (1.0 - f) * mean + f * batch_mean
            unbiased = (1.0 - f) * variance + f * unbiased
        return y, batch_mean, unbiased
    if mean is None or variance is None:
        raise user_error(ValueError, "fused_batch_norm: inference (is_training=False) needs "
                                     "mean and variance")
    y = batch_normalization(x, channel(mean), channel(variance), channel(offset),
                            channel(scale), epsilon)
    return y, to_tensor(mean), to_tensor(variance)


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x^2, axis), epsilon))."""
    from .math import UNARY_FUNCTIONS as U, maximum, reduce_sum
    x = to_float(x)
    axis = dim if axis is None else axis
    return x * U["rsqrt"](maximum(reduce_sum(x * x, axis, keepdims=True), epsilon))


def embedding_lookup(params, ids, max_norm=None, name=None):
    """params[ids] (rows of one params tensor); rows whose L2 norm exceeds max_norm are
    scaled down to it."""
    from .array import gather
    from .math import clip_by_norm
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise user_error(NotImplementedError, "embedding_lookup: sharded params (a list "
                                                  "of several tensors) are not supported")
        params = params[0]
    rows = gather(params, ids)
    if max_norm is not None:
        rows = clip_by_norm(rows, max_norm, axes=[-1])
    return rows


# --- more convolutions and pools ---------------------------------------------------------------

def _one_d(value, what: str):
    """A 1-D stride/size (int, [s] or [1, s, 1]) as the 2-D pair (1, s)."""
    if isinstance(value, int):
        return (1, value)
    value = [int(v) for v in value]
    if len(value) == 1:
        return (1, value[0])
    if len(value) == 3 and value[0] == 1 and value[2] == 1:
        return (1, value[1])
    raise user_error(ValueError, f"{what} must be an int, [s] or [1, s, 1], got {value}")


def _nwc(data_format, what):
    if data_format not in ("NWC", None):
        raise user_error(ValueError, f"{what}: only data_format='NWC' is supported")


def _padding_1d(padding):
    if isinstance(padding, str):
        return padding
    pairs = [tuple(p) for p in padding]
    return [(0, 0), pairs[-2] if len(pairs) == 3 else pairs[0]]


def conv1d(input, filters, stride, padding, data_format="NWC", dilations=None, name=None):
    """[N, W, C] * [K, C, O] -> [N, OW, O], as a Conv2D over a height of 1."""
    from .array import expand_dims, squeeze
    _nwc(data_format, "conv1d")
    x, w = promote(input, filters)
    out = conv2d(expand_dims(x, 1), expand_dims(w, 0), _one_d(stride, "stride"),
                 _padding_1d(padding), dilations=None if dilations is None else
                 _one_d(dilations, "dilations"))
    return squeeze(out, 1)


def _pool_1d(pool, input, ksize, strides, padding, data_format, what):
    from .array import expand_dims, squeeze
    _nwc(data_format, what)
    out = pool(expand_dims(to_tensor(input), 1), _one_d(ksize, "ksize"),
               _one_d(strides, "strides"), _padding_1d(padding))
    return squeeze(out, 1)


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    return _pool_1d(max_pool2d, input, ksize, strides, padding, data_format, "max_pool1d")


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    return _pool_1d(avg_pool2d, input, ksize, strides, padding, data_format, "avg_pool1d")


def conv2d_transpose(input, filters, output_shape, strides, padding="SAME",
                     data_format="NHWC", dilations=None, name=None):
    """The transpose of conv2d (its gradient with respect to the input): input
    [N, H, W, O], filters [KH, KW, C, O] -> output_shape [N, OH, OW, C]."""
    if data_format != "NHWC":
        raise user_error(ValueError, "conv2d_transpose: only data_format='NHWC' is supported")
    shape = tuple(int(d) for d in output_shape)
    if len(shape) != 4:
        raise user_error(ValueError, f"conv2d_transpose: output_shape must have 4 entries, "
                                     f"got {list(shape)}")
    return apply("Conv2DTranspose", promote(input, filters), input_shape=shape,
                 strides=strides, padding=padding, data_format=data_format,
                 dilations=1 if dilations is None else dilations)


def conv3d(input, filters, strides, padding, data_format="NDHWC", dilations=None, name=None):
    """NDHWC input, DHWIO filters [KD, KH, KW, C, O] -> [N, OD, OH, OW, O]; padding
    "SAME" or "VALID"; strides and dilations as 5 values [1, d, h, w, 1] (or an int,
    or 3 values)."""
    return apply("Conv3D", promote(input, filters), strides=strides, padding=padding,
                 data_format=data_format, dilations=1 if dilations is None else dilations)


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """Max over [kd, kh, kw] windows of an NDHWC input; ksize and strides as an int or
    1, 3 or 5 values."""
    return apply("MaxPool3D", [to_tensor(input)], ksize=ksize, strides=strides,
                 padding=padding, data_format=data_format)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """Mean over [kd, kh, kw] windows of an NDHWC input, counting only real (unpadded)
    elements."""
    return apply("AvgPool3D", [to_float(input)], ksize=ksize, strides=strides,
                 padding=padding, data_format=data_format)


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding,
                     data_format=None, dilations=None, name=None):
    """depthwise_conv2d, then a 1x1 conv2d with pointwise_filter [1, 1, C*M, O]."""
    deep = depthwise_conv2d(input, depthwise_filter, strides, padding, data_format,
                            dilations)
    return conv2d(deep, pointwise_filter, 1, "VALID", data_format or "NHWC")
