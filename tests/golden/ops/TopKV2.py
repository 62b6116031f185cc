def top_kv2(input_, k, *, sorted_=True, index_type=_dt.int32, name=None):
    """Builds TensorFlow's ``TopKV2`` op.

    Args:
        input_ (OpDef name 'input'): tensor of type T.
        k: tensor of type Tk.

    Attributes (keyword-only):
        sorted_ (OpDef name 'sorted'): bool, default True.
        index_type: type, one of int16, int32, int64, default int32.

    Attributes set from the inputs:
        T: type, one of float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16,
            float16, uint32, uint64, inferred from the inputs.
        Tk: type, one of int16, int32, int64, inferred from the inputs (Python values become int32).

    Returns:
        A namedtuple ``TopKV2`` of:
          values: tensor of type T.
          indices: tensor of type index_type.
    """
    _b = _OpBuilder("TopKV2", name)
    _b.inferred(
        "T",
        allowed=("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bfloat16",
                 "uint16", "float16", "uint32", "uint64"),
    )
    _b.inferred("Tk", allowed=("int16", "int32", "int64"), default="int32")
    _b.input("input", input_, type_attr="T")
    _b.input("k", k, type_attr="Tk")
    _b.attr("sorted", sorted_, "bool")
    _b.attr("index_type", index_type, "type", allowed=("int16", "int32", "int64"))
    return _b.finish_outputs(("values", None), ("indices", None))
