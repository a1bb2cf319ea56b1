"""Shape inference for every opcode (placeholder: being written)."""


def infer_shape(opcode, operand_shapes, attrs):
    raise NotImplementedError("shape inference is not written yet")
