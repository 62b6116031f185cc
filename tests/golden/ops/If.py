def if_(cond, input_, *, Tout, then_branch, else_branch, output_shapes=(), name=None):
    """Builds TensorFlow's ``If`` op.

    Args:
        cond: tensor of type Tcond.
        input_ (OpDef name 'input'): list of tensors with types Tin.

    Attributes (keyword-only):
        Tout: list(type), minimum 0, required.
        then_branch: func, required.
        else_branch: func, required.
        output_shapes: list(shape), default ().

    Attributes set from the inputs:
        Tcond: type, inferred from the inputs.
        Tin: list(type), minimum 0, inferred from the inputs.

    Returns:
        A list of Outputs (output): list of tensors with types Tout.
    """
    _b = _OpBuilder("If", name)
    _b.inferred("Tin", minimum=0)
    _b.input("cond", cond, type_attr="Tcond")
    _b.list_input("input", input_, type_list_attr="Tin")
    _b.attr("Tout", Tout, "list(type)", minimum=0)
    _b.attr("then_branch", then_branch, "func")
    _b.attr("else_branch", else_branch, "func")
    _b.attr("output_shapes", output_shapes, "list(shape)")
    return _b.finish_outputs(("output", "Tout"))
