def concat_v2(values, axis, *, name=None):
    """Builds TensorFlow's ``ConcatV2`` op.

    Args:
        values: list of N tensors of type T.
        axis: tensor of type Tidx.

    Attributes set from the inputs:
        N: int, minimum 2, inferred from the inputs.
        T: type, inferred from the inputs.
        Tidx: type, one of int32, int64, inferred from the inputs (Python values become int32).

    Returns:
        An Output (output): tensor of type T.
    """
    _b = _OpBuilder("ConcatV2", name)
    _b.inferred("N", minimum=2)
    _b.inferred("Tidx", allowed=("int32", "int64"), default="int32")
    _b.list_input("values", values, type_attr="T", number_attr="N")
    _b.input("axis", axis, type_attr="Tidx")
    return _Output(_b.finish(), 0)
