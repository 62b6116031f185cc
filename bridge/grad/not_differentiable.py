"""The op types TF Python declares not differentiable (``ops.NotDifferentiable``).

Their inputs get no gradient (None), as in TF Python, instead of a
LookupError where TF's C++ registry does not name them.  The list is TF
2.21's registry; ``tests/grad/test_parity.py`` checks it against the oracle's.
Imported last by ``bridge.grad``: a family module that registers one of
these (a gradient op's gradient, say) keeps its registration.
"""
from __future__ import annotations

from .registry import NotDifferentiable, registered

NOT_DIFFERENTIABLE = (
    "ApproximateEqual", "AsString", "Assert", "Assign", "AssignAdd", "AssignSub",
    "AudioMicrofrontend", "AudioSummary", "AudioSummaryV2", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor", "BroadcastGradientArgs", "CTCBeamSearchDecoder", "CTCGreedyDecoder",
    "ConcatOffset", "Const", "DecodeBase64", "DecodePaddedRaw", "DecodeProtoV2", "DecodeRaw",
    "DeleteSessionTensor", "DenseToDenseSetOperation", "DenseToSparseSetOperation",
    "DrawBoundingBoxes", "EditDistance", "EncodeBase64", "EncodeProto", "Equal",
    "ExtractGlimpse", "FakeQuantWithMinMaxArgsGradient", "FakeQuantWithMinMaxVarsGradient",
    "FakeQuantWithMinMaxVarsPerChannelGradient", "FixedLengthRecordReader",
    "GenerateBoundingBoxProposals", "GenerateVocabRemapping", "GetSessionHandle",
    "GetSessionHandleV2", "GetSessionTensor", "Greater", "GreaterEqual", "HSVToRGB",
    "HashTable", "HashTableV2", "HistogramSummary", "IdentityReader", "ImageSummary",
    "InitializeTable", "InitializeTableFromTextFile", "InitializeTableFromTextFileV2",
    "InitializeTableV2", "Invert", "InvertPermutation", "LMDBReader", "LeftShift", "Less",
    "LessEqual", "LinSpace", "LoadAndRemapMatrix", "LogicalAnd", "LogicalNot", "LogicalOr",
    "LookupTableFind", "LookupTableFindV2", "LookupTableInsert", "LookupTableInsertV2",
    "LookupTableSize", "LookupTableSizeV2", "MergeSummary", "Multinomial",
    "MutableDenseHashTable", "MutableDenseHashTableV2", "MutableHashTable",
    "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2", "MutableHashTableV2",
    "NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionWithOverlaps", "NotEqual",
    "OneHot", "OnesLike", "ParameterizedTruncatedNormal", "ParseTensor", "PopulationCount",
    "PyFunc", "PyFuncStateless", "Queue", "QueueClose", "QueueDequeue", "QueueDequeueMany",
    "QueueDequeueUpTo", "QueueEnqueue", "QueueEnqueueMany", "QueueSize", "RaggedRange",
    "RandomCrop", "RandomIndexShuffle", "RandomShuffle", "RandomStandardNormal",
    "RandomUniform", "Range", "Rank", "ReaderNumRecordsProduced", "ReaderNumWorkUnitsCompleted",
    "ReaderRead", "ReaderReadUpTo", "ReaderReset", "ReaderRestoreState", "ReaderSerializeState",
    "ReduceDataset", "ReduceJoin", "RegexReplace", "ResizeBilinearGrad", "RightShift",
    "SampleDistortedBoundingBox", "SampleDistortedBoundingBoxV2", "ScalarSummary", "ScatterAdd",
    "ScatterDiv", "ScatterMul", "ScatterNdAdd", "ScatterNdDiv", "ScatterNdMul", "ScatterNdSub",
    "ScatterNdUpdate", "ScatterSub", "SdcaFprint", "SdcaOptimizer", "SdcaOptimizerV2",
    "SdcaShrinkL1", "SerializeTensor", "SetSize", "Shape", "ShapeN", "Size", "SparseAddGrad",
    "SparseConcat", "SparseMatrixNNZ", "SparseMatrixZeros", "SparseToSparseSetOperation",
    "Stack", "StackClose", "StackPop", "StackPush", "StatelessMultinomial",
    "StatelessRandomBinomial", "StatelessRandomNormal", "StatelessRandomNormalV2",
    "StatelessRandomPoisson", "StatelessRandomShuffle", "StatelessRandomUniform",
    "StatelessRandomUniformFullInt", "StatelessRandomUniformFullIntV2",
    "StatelessRandomUniformInt", "StatelessRandomUniformIntV2", "StatelessRandomUniformV2",
    "StatelessTruncatedNormal", "StatelessTruncatedNormalV2", "StopGradient", "StringJoin",
    "StringSplit", "StringToHashBucket", "StringToHashBucketFast", "StringToHashBucketStrong",
    "StringToNumber", "TFRecordReader", "TPUReplicatedInput", "TensorArray", "TensorArrayClose",
    "TensorArrayCloseV2", "TensorArrayCloseV3", "TensorArrayGrad", "TensorArrayGradV2",
    "TensorArrayGradV3", "TensorArrayGradWithShape", "TensorArraySize", "TensorArraySizeV2",
    "TensorArraySizeV3", "TensorArrayV2", "TensorArrayV3", "TensorListConcatLists",
    "TensorListElementShape", "TensorListLength", "TensorListPushBackBatch", "TensorSummary",
    "TensorSummaryV2", "TextLineReader", "Timestamp", "TruncatedNormal", "VarIsInitializedOp",
    "VariableShape", "WholeFileReader", "XlaVariadicReduce", "ZerosLike",
)

for _op_type in NOT_DIFFERENTIABLE:
    if not registered(_op_type)[0]:
        NotDifferentiable(_op_type)
del _op_type
