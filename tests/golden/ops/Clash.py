def clash(
        lambda_,
        input_,
        range_,
        *,
        name_,
        type_=_dt.float32,
        min_=float("-inf"),
        max_=(3,),
        input__=True,
        name=None,
):
    """An op whose names all need renaming.

    Builds TensorFlow's ``Clash`` op.

    Backslashes \\ and \"\"\"quotes\"\"\" survive.

    Args:
        lambda_ (OpDef name 'lambda'): tensor of type T.
        input_ (OpDef name 'input'): tensor of type int32.
        range_ (OpDef name 'range'): list of N tensors of type T.

    Attributes (keyword-only):
        name_ (OpDef name 'name'): string, required. Clashes with the op's own name parameter.
        type_ (OpDef name 'type'): type, default float32.
        min_ (OpDef name 'min'): float, default float("-inf").
        max_ (OpDef name 'max'): list(int), default (3,).
        input__ (OpDef name 'input_'): bool, default True.

    Attributes set from the inputs:
        T: type, one of float32, float64, inferred from the inputs.
        N: int, minimum 1, inferred from the inputs.

    Returns:
        A namedtuple ``Clash`` of:
          yield_: tensor of type T.
          class_: tensor of type int64.
          list_: list of N tensors of type T.
    """
    _b = _OpBuilder("Clash", name)
    _b.inferred("T", allowed=("float32", "float64"))
    _b.inferred("N", minimum=1)
    _b.input("lambda", lambda_, type_attr="T")
    _b.input("input", input_, dtype="int32")
    _b.list_input("range", range_, type_attr="T", number_attr="N")
    _b.attr("name", name_, "string")
    _b.attr("type", type_, "type")
    _b.attr("min", min_, "float")
    _b.attr("max", max_, "list(int)")
    _b.attr("input_", input__, "bool")
    return _b.finish_outputs(("yield_", None), ("class_", None), ("list_", "N"))
