def add(x, y, *, name=None):
    """Builds TensorFlow's ``Add`` op.

    Args:
        x: tensor of type T.
        y: tensor of type T.

    Attributes set from the inputs:
        T: type, one of bfloat16, float16, float32, float64, uint8, int8, int16, int32, int64,
            complex64, complex128, string, inferred from the inputs.

    Returns:
        An Output (z): tensor of type T.
    """
    _b = _OpBuilder("Add", name)
    _b.inferred(
        "T",
        allowed=("bfloat16", "float16", "float32", "float64", "uint8", "int8", "int16", "int32",
                 "int64", "complex64", "complex128", "string"),
    )
    _b.input("x", x, type_attr="T")
    _b.input("y", y, type_attr="T")
    return _Output(_b.finish(), 0)
