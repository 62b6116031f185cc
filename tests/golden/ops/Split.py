def split(split_dim, value, *, num_split, name=None):
    """Builds TensorFlow's ``Split`` op.

    Args:
        split_dim: tensor of type int32.
        value: tensor of type T.

    Attributes (keyword-only):
        num_split: int, minimum 1, required.

    Attributes set from the inputs:
        T: type, inferred from the inputs.

    Returns:
        A list of Outputs (output): list of num_split tensors of type T.
    """
    _b = _OpBuilder("Split", name)
    _b.input("split_dim", split_dim, dtype="int32")
    _b.input("value", value, type_attr="T")
    _b.attr("num_split", num_split, "int", minimum=1)
    return _b.finish_outputs(("output", "num_split"))
