"""Field numbers of the TensorFlow protocol buffers the bridge reads and writes
itself (with :mod:`bridge.framework._proto`: TF's ``*_pb2`` modules would run
``tensorflow/__init__``), each named once, as in TF's ``.proto`` files.

One class per message, nested as the messages nest (``OpDef.ArgDef``), whose
attributes are the message's fields by their ``.proto`` names and whose
``PROTO`` names the file declaring it; a module's code then reads
``f.get(pf.OpDef.input_arg, [])`` rather than ``f.get(2, [])``.  The
Fortran module names the fields it reads in comments of the same form
(kernels_cpp/fortran/tf_bridge_pb.f90, tf_bridge_objects.f90).

``tests/framework/test_proto_fields.py`` checks every number here against
the declarations in the TensorFlow wheel: the wheel ships no ``.proto``
files, but protoc copies each field's declaration (``repeated
.tensorflow.OpDef.ArgDef input_arg = 2;``) into the ``.pb.h`` headers it
ships, inside the message's class.  A field the bridge starts to read joins
its message's class here.
"""
from __future__ import annotations

__all__ = ["MapEntry", "OpList", "OpDef", "OpDeprecation", "AttrValue", "NodeDef", "GraphDef", "FunctionDef",
           "FunctionDefLibrary", "MetaGraphDef", "SaverDef", "SavedObjectGraph", "SavedObject", "SavedVariable",
           "SavedConcreteFunction", "TrackableObjectGraph"]


class MapEntry:
    """Protobuf's own rule for a ``map<K, V>`` field: a repeated message whose
    key is field 1 and value field 2 (the same for every map field)."""
    key = 1
    value = 2


# --- tensorflow/core/framework ----------------------------------------------------

class OpList:
    PROTO = "core/framework/op_def.proto"
    op = 1


class OpDef:
    PROTO = "core/framework/op_def.proto"
    name = 1
    input_arg = 2
    output_arg = 3
    attr = 4
    summary = 5
    description = 6
    deprecation = 8
    is_aggregate = 16
    is_stateful = 17
    is_commutative = 18
    allows_uninitialized_input = 19
    control_output = 20

    class ArgDef:
        name = 1
        description = 2
        type = 3
        type_attr = 4
        number_attr = 5
        type_list_attr = 6
        is_ref = 16

    class AttrDef:
        name = 1
        type = 2
        default_value = 3
        description = 4
        has_minimum = 5
        minimum = 6
        allowed_values = 7


class OpDeprecation:
    PROTO = "core/framework/op_def.proto"
    version = 1
    explanation = 2


class AttrValue:
    PROTO = "core/framework/attr_value.proto"
    list = 1
    type = 6
    shape = 7

    class ListValue:
        s = 2
        shape = 7


class NodeDef:
    PROTO = "core/framework/node_def.proto"
    name = 1
    op = 2
    input = 3
    attr = 5          # map<string, AttrValue>


class GraphDef:
    PROTO = "core/framework/graph.proto"
    node = 1
    library = 2
    versions = 4


class FunctionDef:
    PROTO = "core/framework/function.proto"
    signature = 1
    node_def = 3
    ret = 4           # map<string, string>
    arg_attr = 7      # map<uint32, ArgAttrs>

    class ArgAttrs:
        attr = 1      # map<string, AttrValue>


class FunctionDefLibrary:
    PROTO = "core/framework/function.proto"
    function = 1


# --- tensorflow/core/protobuf: SavedModels and checkpoints --------------------------

class MetaGraphDef:
    PROTO = "core/protobuf/meta_graph.proto"
    graph_def = 2
    saver_def = 3
    object_graph_def = 7


class SaverDef:
    PROTO = "core/protobuf/saver.proto"
    restore_op_name = 3


class SavedObjectGraph:
    PROTO = "core/protobuf/saved_object_graph.proto"
    nodes = 1
    concrete_functions = 2    # map<string, SavedConcreteFunction>


class SavedObject:
    PROTO = "core/protobuf/saved_object_graph.proto"
    children = 1              # TrackableObjectGraph.TrackableObject.ObjectReference
    variable = 7


class SavedVariable:
    PROTO = "core/protobuf/saved_object_graph.proto"
    dtype = 1
    shape = 2
    name = 6


class SavedConcreteFunction:
    PROTO = "core/protobuf/saved_object_graph.proto"
    bound_inputs = 2          # repeated int32, packed


class TrackableObjectGraph:
    PROTO = "core/protobuf/trackable_object_graph.proto"
    nodes = 1

    class TrackableObject:
        children = 1
        attributes = 2

        class ObjectReference:
            node_id = 1
            local_name = 2

        class SerializedTensor:
            name = 1
            checkpoint_key = 3
