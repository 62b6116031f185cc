def unique(x, *, out_idx=_dt.int32, name=None):
    """Builds TensorFlow's ``Unique`` op.

    Args:
        x: tensor of type T.

    Attributes (keyword-only):
        out_idx: type, one of int32, int64, default int32.

    Attributes set from the inputs:
        T: type, inferred from the inputs.

    Returns:
        A namedtuple ``Unique`` of:
          y: tensor of type T.
          idx: tensor of type out_idx.
    """
    _b = _OpBuilder("Unique", name)
    _b.input("x", x, type_attr="T")
    _b.attr("out_idx", out_idx, "type", allowed=("int32", "int64"))
    return _b.finish_outputs(("y", None), ("idx", None))
