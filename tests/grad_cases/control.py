"""Gradient cases: control flow (If, Case, While; TF v1 Switch/Merge/Enter/Exit), TensorLists and TensorArrays."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "Case", "Enter", "Exit", "If", "LoopCond", "Merge", "NextIteration", "RefEnter", "RefExit",
    "RefMerge", "RefNextIteration", "RefSwitch", "StatelessCase", "StatelessIf",
    "StatelessWhile", "Switch", "TensorArrayConcat", "TensorArrayConcatV2",
    "TensorArrayConcatV3", "TensorArrayGather", "TensorArrayGatherV2", "TensorArrayGatherV3",
    "TensorArrayRead", "TensorArrayReadV2", "TensorArrayReadV3", "TensorArrayScatter",
    "TensorArrayScatterV2", "TensorArrayScatterV3", "TensorArraySplit", "TensorArraySplitV2",
    "TensorArraySplitV3", "TensorArrayWrite", "TensorArrayWriteV2", "TensorArrayWriteV3",
    "TensorListConcat", "TensorListConcatV2", "TensorListFromTensor", "TensorListGather",
    "TensorListGetItem", "TensorListPopBack", "TensorListPushBack", "TensorListResize",
    "TensorListScatter", "TensorListScatterIntoExistingList", "TensorListScatterV2",
    "TensorListSetItem", "TensorListSplit", "TensorListStack", "While",
})
