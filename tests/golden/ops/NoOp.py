def no_op(*, name=None):
    """Builds TensorFlow's ``NoOp`` op.

    Returns:
        The Operation (NoOp has no outputs).
    """
    _b = _OpBuilder("NoOp", name)
    return _b.finish()
