"""Neural-network functions (tf.nn names): activations, softmax, normalization,
losses, convolution and pooling."""
from __future__ import annotations

from .core import apply, apply_multi, promote, to_float, to_tensor, user_error


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
