"""Gradient cases: TF's array_grad.py (shapes, slicing, gathers, scatters, pads, diagonals), manip, check, data-flow, logging and debug ops."""
from __future__ import annotations

from bridge import ops  # noqa: F401
from bridge.framework.graph import get_default_graph

from . import Raises, case, cplx, i32, i64, positive, signed  # noqa: F401


def _old_graph(producer: int) -> None:
    """Lower the default graph's GraphDef producer version below ``producer`` (by importing an
    empty GraphDef of version producer - 1), so an op removed from GraphDefs at ``producer`` can
    still be built, as in an old imported model."""
    get_default_graph().import_graph_def(bytes([0x22, 0x02, 0x08, producer - 1]))


CASES = [
    # --- the basics TF's C++ registry covers ---------------------------------------------------
    case("Identity", lambda x: ops.identity(x), signed(2, 3)),
    case("Reshape", lambda x: ops.reshape(x, [3, -1]), signed(2, 3)),
    case("ExpandDims", lambda x: ops.expand_dims(x, -1), signed(2, 3)),
    case("Squeeze", lambda x: ops.squeeze(x, squeeze_dims=[1]), signed(2, 1, 3)),
    case("Transpose", lambda x: ops.transpose(x, [2, 0, 1]), signed(2, 3, 4)),
    case("Tile", lambda x: ops.tile(x, [2, 1, 3]), signed(2, 3, 1)),
    case("Fill", lambda v: ops.fill([2, 3], v), signed()),
    case("BroadcastTo", lambda x: ops.broadcast_to(x, [2, 4, 3]), signed(4, 1)),
    case("Pack", lambda a, b: ops.pack([a, b], axis=1), signed(2, 3), signed(2, 3)),
    case("Unpack", lambda x: ops.unpack(x, num=3, axis=1), signed(2, 3, 2)),
    case("Concat", lambda a, b: ops.concat(1, [a, b]), signed(2, 3), signed(2, 2)),
    case("ConcatV2", lambda a, b: ops.concat_v2([a, b], 0), signed(2, 3), signed(1, 3)),
    case("Split", lambda x: ops.split(1, x, num_split=2), signed(2, 4)),
    case("SplitV", lambda x: ops.split_v(x, [1, 3, 2], 1, num_split=3), signed(2, 6)),
    case("SplitV", lambda x: ops.split_v(x, [2, -1], 0, num_split=2), signed(5, 2), label="inferred"),
    case("Slice", lambda x: ops.slice(x, [1, 0], [2, -1]), signed(4, 3)),
    case("StridedSlice", lambda x: ops.strided_slice(x, [1, 0], [4, 3], [2, 1]), signed(5, 3)),
    case("StridedSlice", lambda x, b, e, st: ops.strided_slice(x, b, e, st), signed(5, 3),
         i64([1, 0]), i64([4, 3]), i64([2, 1]), label="int64"),
    case("StridedSlice", lambda x: ops.strided_slice(x, [0, 2, 0], [0, 0, 1], [1, -1, 1], begin_mask=1,
                                                     end_mask=3, shrink_axis_mask=4), signed(2, 4, 3),
         label="masks"),
    case("StridedSlice", lambda x: ops.strided_slice(x, [1, 0], [2, 2], [1, 1], ellipsis_mask=1,
                                                     new_axis_mask=2), signed(2, 4, 3), label="ellipsis"),
    case("Gather", lambda p, i: ops.gather(p, i), signed(4, 3), i32([2, 0, 2])),
    case("GatherV2", lambda p, i: ops.gather_v2(p, i, 1), signed(2, 4, 3), i32([[3, 0], [1, 3]])),
    case("GatherV2", lambda p, i: ops.gather_v2(p, i, 1, batch_dims=1), signed(2, 4, 3),
         i32([[3, 0], [1, 3]]), label="batch_dims"),
    case("Pad", lambda x: ops.pad(x, [[1, 0], [2, 1]]), signed(2, 3)),
    case("Diag", lambda x: ops.diag(x), signed(2, 3)),
    case("DiagPart", lambda x: ops.diag_part(x), signed(2, 3, 2, 3)),
    case("ReverseV2", lambda x: ops.reverse_v2(x, [0, -1]), signed(2, 3, 2)),
    case("Reverse", lambda x: ops.reverse(x, [True, False, True]), signed(2, 3, 2)),
    case("ReverseSequence", lambda x, n: ops.reverse_sequence(x, n, seq_dim=1, batch_dim=0), signed(3, 4, 2),
         i64([1, 4, 3])),
    case("EnsureShape", lambda x: ops.ensure_shape(x, shape=[2, 3]), signed(2, 3)),
    case("PlaceholderWithDefault", lambda x: ops.placeholder_with_default(x, shape=[2, 3]), signed(2, 3)),
    case("CheckNumerics", lambda x: ops.check_numerics(x, message="bad"), signed(2, 3)),
    case("CheckNumericsV2", lambda x: ops.check_numerics_v2(x, message="bad"), signed(2, 3)),
    case("IdentityN", lambda a, b: ops.identity_n([a, b]), signed(2, 3), signed(3)),
    case("ConjugateTranspose", lambda x: ops.conjugate_transpose(x, [1, 0, 2]), cplx(2, 3, 2)),
    case("ConjugateTranspose", lambda x: ops.conjugate_transpose(x, [1, 0]), signed(2, 3), label="real"),
    case("Roll", lambda x: ops.roll(x, [1, -2], [0, 1]), signed(3, 4)),
    # --- scatters and gathers ----------------------------------------------------------------
    case("GatherNd", lambda p, i: ops.gather_nd(p, i), signed(3, 4, 2), i32([[2, 1], [0, 3], [2, 1]])),
    case("GatherNd", lambda p, i: ops.gather_nd(p, i), signed(3, 2), i64([[[2, 1]], [[0, 0]]]),
         label="scalars"),
    case("ScatterNd", lambda i, u: ops.scatter_nd(i, u, [4, 3]), i32([[2], [0], [2]]), signed(3, 3)),
    case("ScatterNdNonAliasingAdd", lambda x, i, u: ops.scatter_nd_non_aliasing_add(x, i, u),
         signed(4, 3), i32([[2, 1], [0, 0], [2, 1]]), signed(3)),
    case("TensorScatterUpdate", lambda x, i, u: ops.tensor_scatter_update(x, i, u), signed(4, 3),
         i32([[2], [0]]), signed(2, 3)),
    case("TensorScatterAdd", lambda x, i, u: ops.tensor_scatter_add(x, i, u), signed(4, 3),
         i32([[2], [0], [2]]), signed(3, 3)),
    case("TensorScatterSub", lambda x, i, u: ops.tensor_scatter_sub(x, i, u), signed(4, 3),
         i64([[2, 1], [0, 2]]), signed(2)),
    case("TensorScatterMax", lambda x, i, u: ops.tensor_scatter_max(x, i, u), signed(4, 3),
         i32([[2], [0]]), signed(2, 3)),
    case("TensorScatterMin", lambda x, i, u: ops.tensor_scatter_min(x, i, u), signed(4, 3),
         i32([[2], [0]]), signed(2, 3)),
    case("TensorStridedSliceUpdate",
         lambda x, v: ops.tensor_strided_slice_update(x, [1, 0], [4, 3], [2, 1], v), signed(5, 3), signed(2, 3)),
    case("TensorStridedSliceUpdate",
         lambda x, v: ops.tensor_strided_slice_update(x, [0, 2], [0, 3], [1, 1], v, begin_mask=1, end_mask=1,
                                                      shrink_axis_mask=2), signed(3, 4), signed(3),
         label="masks"),
    case("StridedSliceGrad", lambda dy: ops.strided_slice_grad([5, 3], [1, 0], [4, 3], [2, 1], dy), signed(2, 3)),
    case("StridedSliceGrad", lambda dy: ops.strided_slice_grad([2, 4, 3], [0, 2, 0], [0, 0, 1], [1, -1, 1], dy,
                                                               begin_mask=1, end_mask=3, shrink_axis_mask=4),
         signed(2, 3), label="masks"),
    # --- diagonals and bands -------------------------------------------------------------------
    case("MatrixDiag", lambda d: ops.matrix_diag(d), signed(2, 3)),
    case("MatrixDiagPart", lambda x: ops.matrix_diag_part(x), signed(2, 3, 4)),
    case("MatrixSetDiag", lambda x, d: ops.matrix_set_diag(x, d), signed(2, 4, 3), signed(2, 3)),
    case("MatrixDiagV2", lambda d, p: ops.matrix_diag_v2(d, [-1, 1], 4, 4, p), signed(2, 3, 4), signed()),
    case("MatrixDiagV3", lambda d, p: ops.matrix_diag_v3(d, [-1, 1], 3, 4, p, align="LEFT_RIGHT"),
         signed(2, 3, 3), signed()),
    case("MatrixDiagV3", lambda d, p: ops.matrix_diag_v3(d, 1, -1, -1, p), signed(2, 3), signed(), label="k1"),
    case("MatrixDiagPartV2", lambda x, p: ops.matrix_diag_part_v2(x, [-1, 2], p), signed(2, 3, 4), signed()),
    case("MatrixDiagPartV3", lambda x, p: ops.matrix_diag_part_v3(x, [-2, 1], p, align="LEFT_LEFT"),
         signed(2, 4, 3), signed()),
    case("MatrixSetDiagV2", lambda x, d: ops.matrix_set_diag_v2(x, d, [0, 1]), signed(2, 3, 4), signed(2, 2, 3)),
    case("MatrixSetDiagV3", lambda x, d: ops.matrix_set_diag_v3(x, d, -1, align="LEFT_RIGHT"), signed(2, 4, 3),
         signed(2, 3)),
    case("MatrixBandPart", lambda x: ops.matrix_band_part(x, 1, -1), signed(2, 4, 3)),
    case("MatrixBandPart", lambda x: ops.matrix_band_part(x, i64(0), i64(2)), signed(4, 5), label="int64"),
    # --- pads ----------------------------------------------------------------------------------
    case("PadV2", lambda x, c: ops.pad_v2(x, [[1, 0], [2, 1]], c), signed(2, 3), signed()),
    case("MirrorPad", lambda x: ops.mirror_pad(x, [[1, 0], [2, 1]], mode="REFLECT"), signed(3, 4)),
    case("MirrorPad", lambda x: ops.mirror_pad(x, i64([[1, 2], [0, 3]]), mode="SYMMETRIC"), signed(3, 4),
         label="symmetric"),
    case("MirrorPadGrad", lambda x: ops.mirror_pad_grad(x, [[1, 0], [2, 1]], mode="REFLECT"), signed(4, 7)),
    case("MirrorPadGrad", lambda x: ops.mirror_pad_grad(x, [[1, 2], [0, 3]], mode="SYMMETRIC"), signed(6, 7),
         label="symmetric"),
    # --- space/batch/depth ---------------------------------------------------------------------
    case("SpaceToBatch", lambda x: ops.space_to_batch(x, [[0, 1], [1, 1]], block_size=2), signed(1, 3, 2, 2)),
    case("BatchToSpace", lambda x: ops.batch_to_space(x, [[0, 1], [1, 1]], block_size=2), signed(4, 2, 2, 2)),
    case("SpaceToBatchND", lambda x: ops.space_to_batch_nd(x, [2, 1], [[1, 1], [0, 2]]), signed(2, 4, 2, 1)),
    case("BatchToSpaceND", lambda x: ops.batch_to_space_nd(x, [2, 1], [[1, 1], [0, 1]]), signed(4, 3, 2, 1)),
    case("SpaceToDepth", lambda x: ops.space_to_depth(x, block_size=2), signed(1, 4, 2, 2)),
    case("DepthToSpace", lambda x: ops.depth_to_space(x, block_size=2), signed(1, 2, 1, 8)),
    case("ExtractImagePatches", lambda x: ops.extract_image_patches(
        x, ksizes=[1, 2, 2, 1], strides=[1, 2, 1, 1], rates=[1, 1, 2, 1], padding="VALID"), signed(2, 5, 4, 2)),
    case("ExtractImagePatches", lambda x: ops.extract_image_patches(
        x, ksizes=[1, 3, 2, 1], strides=[1, 2, 2, 1], rates=[1, 1, 1, 1], padding="SAME"), signed(1, 4, 5, 2),
         label="same"),
    case("ExtractVolumePatches", lambda x: ops.extract_volume_patches(
        x, ksizes=[1, 2, 2, 1, 1], strides=[1, 1, 2, 1, 1], padding="VALID"), signed(1, 3, 4, 2, 2)),
    case("ExtractVolumePatches", lambda x: ops.extract_volume_patches(
        x, ksizes=[1, 2, 1, 2, 1], strides=[1, 2, 1, 2, 1], padding="SAME"), signed(1, 3, 2, 3, 1), label="same"),
    # --- quantization (straight-through estimators) --------------------------------------------
    case("QuantizeAndDequantizeV2", lambda x, lo, hi: ops.quantize_and_dequantize_v2(x, lo, hi, range_given=True),
         signed(2, 3), -1.0, 1.0),
    case("QuantizeAndDequantizeV3", lambda x, lo, hi: ops.quantize_and_dequantize_v3(x, lo, hi, i32(4)),
         signed(2, 3), -1.0, 1.0),
    case("QuantizeAndDequantizeV4", lambda x, lo, hi: ops.quantize_and_dequantize_v4(x, lo, hi, range_given=True),
         signed(2, 3), -1.0, 1.0),
    case("QuantizeAndDequantizeV4", lambda x, lo, hi: ops.quantize_and_dequantize_v4(x, lo, hi, axis=1),
         signed(2, 3), -1.0 * positive(3) - 0.3, positive(3) + 0.3, label="axis"),
    case("FakeQuantWithMinMaxArgs", lambda x: ops.fake_quant_with_min_max_args(x, min_=-1.0, max_=1.0),
         signed(2, 3), dtypes=["float32"]),
    case("FakeQuantWithMinMaxVars", lambda x, lo, hi: ops.fake_quant_with_min_max_vars(x, lo, hi, num_bits=5),
         signed(2, 3), -1.0, 1.0, dtypes=["float32"]),
    case("FakeQuantWithMinMaxVarsPerChannel",
         lambda x, lo, hi: ops.fake_quant_with_min_max_vars_per_channel(x, lo, hi, narrow_range=True),
         signed(2, 3), -1.0 * positive(3) - 0.3, positive(3) + 0.3, dtypes=["float32"]),
    # --- partitions and stitches ---------------------------------------------------------------
    case("DynamicPartition", lambda x, p: ops.dynamic_partition(x, p, num_partitions=3), signed(4, 2),
         i32([2, 0, 2, 1])),
    case("DynamicPartition", lambda x, p: ops.dynamic_partition(x, p, num_partitions=2), signed(2, 3, 2),
         i32([[1, 0, 1], [1, 1, 0]]), label="matrix"),
    case("DynamicStitch", lambda a, b: ops.dynamic_stitch([i32([0, 3]), i32([[2], [1]])], [a, b]), signed(2, 3),
         signed(2, 1, 3)),
    case("DynamicStitch", lambda a, b: ops.dynamic_stitch([i32([0, 2]), i32([2, 1])], [a, b]), signed(2, 3),
         signed(2, 3), label="overlap"),
    case("ParallelDynamicStitch", lambda a, b: ops.parallel_dynamic_stitch([i32([0, 3]), i32([[2], [1]])], [a, b]),
         signed(2, 3), signed(2, 1, 3)),
    # --- logging, debugging and ops a graph seldom holds ---------------------------------------
    case("Print", lambda x, n: ops.print(x, [x, n], message="x: ", first_n=1), signed(2, 3), i32(3)),
    case("DebugIdentityV2", lambda x: ops.debug_identity_v2(x), signed(2, 3)),
    # A ref tensor comes from Assign(variable, x), which is not differentiable (TF's state_grad.py):
    # the gradient passes the ref op and stops at Assign on both sides.  (The Identity: the bridge's
    # walk takes ref tensors for non-float ones, so a Mul fed a ref directly hands Assign to C++.)
    case("RefIdentity", lambda x: ops.mul(x, ops.identity(ops.ref_identity(_assigned(x)))), signed(2, 3)),
    # TF's gradients of these raise (PreventGradient: LookupError; the DebugGradient ops assert
    # that a tfdbg GradientsDebugger named in the op's name exists; _EagerConst: AssertionError),
    # which the harness cannot compare: they sit where no gradient reaches them (StopGradient),
    # so neither side asks for theirs.
    case("DebugGradientIdentity", lambda x: ops.mul(x, ops.stop_gradient(ops.debug_gradient_identity(x))),
         signed(2, 3)),
    case("DebugGradientRefIdentity",
         lambda x: ops.mul(x, ops.stop_gradient(ops.debug_gradient_ref_identity(_assigned(x)))), signed(2, 3)),
    case("PreventGradient", lambda x: ops.mul(x, ops.stop_gradient(ops.prevent_gradient(x, message="no"))),
         signed(2, 3)),
    case("_EagerConst", lambda x: ops.mul(x, ops.stop_gradient(ops._eager_const(x, name="eager_const"))),
         signed(2, 3)),
    # Where a gradient does reach them, TF's raises (PreventGradient: LookupError naming the
    # message; _EagerConst: eager-only), and so does the bridge's.
    case("PreventGradient", lambda x: ops.mul(x, ops.prevent_gradient(x, message="no")), signed(2, 3),
         dtypes=["float64"], label="reached",
         raises=Raises("LookupError: Gradient explicitly disabled. Reason: b'no'", LookupError,
                       r"^gradient explicitly disabled for 'PreventGradient': no$")),
    case("_EagerConst", lambda x: ops.mul(x, ops._eager_const(x, name="eager_const")), signed(2, 3),
         dtypes=["float64"], label="reached",
         raises=Raises("AssertionError: This op should never interact with gradient APIs.", LookupError,
                       r"^operation 'eager_const' \(_EagerConst\) should never interact with gradients")),
    # --- complex values ------------------------------------------------------------------------
    case("TensorScatterUpdate", lambda x, i, u: ops.tensor_scatter_update(x, i, u), cplx(4, 3), i32([[2], [0]]),
         cplx(2, 3), label="complex"),
    case("MatrixSetDiagV3", lambda x, d: ops.matrix_set_diag_v3(x, d, [-1, 0]), cplx(3, 3), cplx(2, 3),
         label="complex"),
    case("Concat", lambda a, b: ops.concat(0, [a, b]), cplx(2, 3), cplx(1, 3), label="complex"),
    case("Gather", lambda p, i: ops.gather(p, i), cplx(4, 2), i64([[1, 3], [1, 0]]), label="complex"),
    case("DynamicStitch", lambda a, b: ops.dynamic_stitch([i32([1, 2]), i32([0])], [a, b]), cplx(2, 2),
         cplx(1, 2), label="complex"),
    # --- second order through the gradient graphs: the op between nonlinear ones ----------------
    case("Gather", lambda p, i: ops.square(ops.gather(ops.tanh(p), i)), signed(4, 3), i32([2, 0, 2]),
         label="nonlinear"),
    case("Concat", lambda a, b: ops.square(ops.concat(1, [ops.sin(a), b])), signed(2, 3), signed(2, 2),
         label="nonlinear"),
    case("TensorScatterUpdate", lambda x, i, u: ops.square(ops.tensor_scatter_update(ops.sin(x), i, ops.exp(u))),
         signed(4, 3), i32([[2], [0]]), signed(2, 3), label="nonlinear"),
    case("TensorStridedSliceUpdate", lambda x, v: ops.square(
        ops.tensor_strided_slice_update(ops.sin(x), [1, 0], [4, 3], [2, 1], ops.exp(v))), signed(5, 3),
         signed(1, 3), label="nonlinear"),
    case("MatrixDiagPartV3", lambda x, p: ops.square(ops.matrix_diag_part_v3(ops.sin(x), [-1, 1], p)),
         signed(3, 4), signed(), label="nonlinear"),
    case("MatrixSetDiag", lambda x, d: ops.square(ops.matrix_set_diag(ops.sin(x), ops.exp(d))), signed(3, 4),
         signed(3), label="nonlinear"),
    case("ExtractImagePatches", lambda x: ops.square(ops.extract_image_patches(
        ops.sin(x), ksizes=[1, 2, 2, 1], strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="SAME")),
         signed(1, 3, 3, 2), label="nonlinear"),
    case("DynamicPartition", lambda x, p: [ops.square(y) for y in ops.dynamic_partition(ops.sin(x), p,
                                                                                       num_partitions=2)],
         signed(4, 2), i32([1, 0, 0, 1]), label="nonlinear"),
    case("DynamicStitch", lambda a, b: ops.square(ops.dynamic_stitch([i32([0, 2]), i32([2, 1])],
                                                                     [ops.sin(a), b])),
         signed(2, 3), signed(2, 3), label="nonlinear"),
    case("TensorScatterMax", lambda x, i, u: ops.square(ops.tensor_scatter_max(ops.sin(x), i, u)), signed(4, 3),
         i32([[2], [0]]), signed(2, 3), label="nonlinear"),
    case("MatrixDiagV3", lambda d, p: ops.square(ops.matrix_diag_v3(ops.sin(d), [-1, 1], 3, 4, p)),
         signed(3, 3), signed(), label="nonlinear"),
    case("GatherV2", lambda p, i: ops.square(ops.gather_v2(ops.sin(p), i, 1)),
         signed(2, 4, 3), i32([[3, 0], [1, 3]]), label="nonlinear"),
    case("GatherNd", lambda p, i: ops.square(ops.gather_nd(ops.sin(p), i)),
         signed(3, 4, 2), i32([[2, 1], [0, 3], [2, 1]]), label="nonlinear"),
    case("ScatterNd", lambda i, u: ops.square(ops.scatter_nd(i, ops.sin(u), [4, 3])),
         i32([[2], [0], [2]]), signed(3, 3), label="nonlinear"),
    case("Slice", lambda x: ops.square(ops.slice(ops.sin(x), [1, 0], [2, -1])),
         signed(4, 3), label="nonlinear"),
    case("StridedSlice", lambda x: ops.square(ops.strided_slice(ops.sin(x), [1, 0], [4, 3], [2, 1])),
         signed(5, 3), label="nonlinear"),
    case("Tile", lambda x: ops.square(ops.tile(ops.sin(x), [2, 1, 3])), signed(2, 3, 1), label="nonlinear"),
    case("BroadcastTo", lambda x: ops.square(ops.broadcast_to(ops.sin(x), [2, 4, 3])),
         signed(4, 1), label="nonlinear"),
    case("ReverseSequence", lambda x, n: ops.square(ops.reverse_sequence(ops.sin(x), n, seq_dim=1, batch_dim=0)),
         signed(3, 4, 2), i64([1, 4, 3]), label="nonlinear"),
    case("MirrorPad", lambda x: ops.square(ops.mirror_pad(ops.sin(x), [[1, 0], [2, 1]], mode="REFLECT")),
         signed(3, 4), label="nonlinear"),
    case("SpaceToBatchND", lambda x: ops.square(ops.space_to_batch_nd(ops.sin(x), [2, 1], [[1, 1], [0, 2]])),
         signed(2, 4, 2, 1), label="nonlinear"),
    case("DepthToSpace", lambda x: ops.square(ops.depth_to_space(ops.sin(x), block_size=2)),
         signed(1, 2, 1, 8), label="nonlinear"),
    case("Roll", lambda x: ops.square(ops.roll(ops.sin(x), [1, -2], [0, 1])),
         signed(3, 4), label="nonlinear"),
    case("Pad", lambda x: ops.square(ops.pad(ops.sin(x), [[1, 0], [2, 1]])), signed(2, 3), label="nonlinear"),
    case("Fill", lambda v: ops.square(ops.fill([2, 3], ops.sin(v))), signed(), label="nonlinear"),
    case("MatrixBandPart", lambda x: ops.square(ops.matrix_band_part(ops.sin(x), 1, -1)),
         signed(2, 4, 3), label="nonlinear"),
    case("Diag", lambda x: ops.square(ops.diag(ops.sin(x))), signed(2, 3), label="nonlinear"),
    case("Unpack", lambda x: [ops.square(y) for y in ops.unpack(ops.sin(x), num=3, axis=1)],
         signed(2, 3, 2), label="nonlinear"),
    case("SplitV", lambda x: [ops.square(y) for y in ops.split_v(ops.sin(x), [1, 3, 2], 1, num_split=3)],
         signed(2, 6), label="nonlinear"),
    case("ConcatV2", lambda a, b: ops.square(ops.concat_v2([ops.sin(a), b], 0)),
         signed(2, 3), signed(1, 3), label="nonlinear"),
    case("Transpose", lambda x: ops.square(ops.transpose(ops.sin(x), [2, 0, 1])),
         signed(2, 3, 4), label="nonlinear"),
    # QuantizeAndDequantize was removed from GraphDefs at version 22: built in an older graph, as
    # in an old imported model (float16/bfloat16 have no CPU kernel: skipped).
    case("QuantizeAndDequantize", lambda x: (_old_graph(22), ops.quantize_and_dequantize(
        x, range_given=True, input_min=-1.0, input_max=1.0))[1], signed(2, 3, high=0.95)),
    case("QuantizeAndDequantize", lambda x: (_old_graph(22), ops.quantize_and_dequantize(
        x, signed_input=False, num_bits=4))[1], positive(2, 3), label="range_from_data"),
]


def _assigned(x):
    """x assigned to a fresh variable: a ref tensor holding x's value.  Assign's gradient is None
    in TF; the bridge's C++ registry has none at all, so both take it from OnesLike's (None) by
    an override the GraphDef carries to TF too."""
    graph = x.op.graph
    with graph.gradient_override_map({"Assign": "OnesLike"}):
        return ops.assign(ops.variable_v2(shape=x.shape, dtype=x.dtype), x)


#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
#: QuantizeAndDequantizeV4Grad: TF's gradient always raises TypeError (its function takes one
#: output gradient, the op has three), so no case can compare with it.
PENDING: frozenset[str] = frozenset()
