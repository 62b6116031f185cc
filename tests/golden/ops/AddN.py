def add_n(inputs, *, name=None):
    """Builds TensorFlow's ``AddN`` op.

    Args:
        inputs: list of N tensors of type T.

    Attributes set from the inputs:
        N: int, minimum 1, inferred from the inputs.
        T: type, one of float32, float64, int32, uint8, int16, int8, complex64, int64, qint8,
            quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, float16, uint32, uint64,
            variant, inferred from the inputs.

    Returns:
        An Output (sum): tensor of type T.
    """
    _b = _OpBuilder("AddN", name)
    _b.inferred("N", minimum=1)
    _b.inferred(
        "T",
        allowed=("float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "int64",
                 "qint8", "quint8", "qint32", "bfloat16", "qint16", "quint16", "uint16",
                 "complex128", "float16", "uint32", "uint64", "variant"),
    )
    _b.list_input("inputs", inputs, type_attr="T", number_attr="N")
    return _Output(_b.finish(), 0)
