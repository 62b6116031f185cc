"""Gradient cases: TF's sparse_grad.py, CSR matrices, ragged tensors, composite tensors and optionals.

A sparse tensor is an (indices int64, values, dense_shape int64) triple: the
indices and shapes are fed, the values differentiated."""
from __future__ import annotations

from bridge import ops

from . import NO_GRADIENT as _NO_GRADIENT, Raises, case, cplx, i32, i64, signed

# A 3x4 sparse matrix with 5 entries, in canonical (row-major) order; row 1 is empty.
IDX = i64([[0, 0], [0, 2], [0, 3], [2, 0], [2, 3]])
SHAPE = i64([3, 4])
# The same entries out of order (SparseReorder).
IDX_UNORDERED = i64([[2, 3], [0, 2], [2, 0], [0, 0], [0, 3]])
# The row splits of a ragged tensor with 7 values in 4 rows of 2, 0, 3 and 2.
SPLITS = i64([0, 2, 2, 5, 7])
# A 2x3x4 sparse tensor with 6 entries.
IDX3 = i64([[0, 0, 1], [0, 1, 3], [0, 2, 0], [1, 0, 0], [1, 0, 2], [1, 2, 3]])
SHAPE3 = i64([2, 3, 4])


def _stdmm(adj_a, adj_b):
    def build(idx, vals, shape, b):
        return ops.sparse_tensor_dense_mat_mul(idx, vals, shape, b, adjoint_a=adj_a, adjoint_b=adj_b)
    return build


def _csr(idx, vals, shape):
    return ops.sparse_tensor_to_csr_sparse_matrix(idx, vals, shape)


def _to_dense(csr, dtype, shape=None):
    """The dense matrix; with ``shape``, its static shape too (for ops without a CPU kernel,
    whose cases are compared by structure, which needs the upstream gradients' shapes)."""
    dense = ops.csr_sparse_matrix_to_dense(csr, type_=dtype)
    return dense if shape is None else ops.ensure_shape(dense, shape=shape)


def _smm(**flags):
    """SparseMatrixMatMul of CSR a (its values) and dense b, with flags."""
    def build(idx, vals, shape, b):
        return ops.sparse_matrix_mat_mul(_csr(idx, vals, shape), b, **flags)
    return build


def _ssmm(**flags):
    """SparseMatrixSparseMatMul of two CSR matrices, back to dense."""
    def build(ai, av, ash, bi, bv, bsh):
        return _to_dense(ops.sparse_matrix_sparse_mat_mul(_csr(ai, av, ash), _csr(bi, bv, bsh), type_=av.dtype,
                                                          **flags), av.dtype)
    return build


# The entries of 4x3 CSR matrices for products with the 3x4 IDX one.  TF prunes B's gradient to
# the entries of A^H grad (and A's to grad B^H): every entry must take part in the product, or
# TF's gradient has fewer values than the matrix.  IDX has no entries in column 1, so IDX_T has
# none in row 1 (for A B) and IDX_T2 none in column 1 (for A^T B^T).
IDX_T = i64([[0, 1], [0, 2], [2, 0], [2, 2], [3, 0], [3, 1]])
IDX_T2 = i64([[0, 0], [1, 2], [2, 0], [3, 0], [3, 2]])
SHAPE_T = i64([4, 3])


#: The real dtypes CSR matrices take.
REAL = ("float64", "float32")

CASES = [
    # --- TF's sparse_grad.py ------------------------------------------------------------------
    case("SparseTensorDenseMatMul", _stdmm(False, False), IDX, signed(5), SHAPE, signed(4, 2)),
    case("SparseTensorDenseMatMul", _stdmm(True, False), IDX, signed(5), SHAPE, signed(3, 2),
         label="adjoint_a"),
    case("SparseTensorDenseMatMul", _stdmm(False, True), IDX, signed(5), SHAPE, signed(2, 4),
         label="adjoint_b"),
    case("SparseTensorDenseMatMul", _stdmm(True, True), IDX, signed(5), SHAPE, signed(2, 3),
         label="adjoint_ab"),
    case("SparseTensorDenseMatMul", _stdmm(True, True), IDX, cplx(5), SHAPE, cplx(2, 3),
         label="adjoint_ab_complex"),
    case("SparseTensorDenseMatMul", _stdmm(False, False), IDX, cplx(5), SHAPE, cplx(4, 2),
         label="complex"),
    case("SparseReduceSum", lambda i, v, s, a: ops.sparse_reduce_sum(i, v, s, a), IDX, signed(5), SHAPE, i32([1])),
    case("SparseReduceSum", lambda i, v, s, a: ops.sparse_reduce_sum(i, v, s, a, keep_dims=True),
         IDX3, signed(6), SHAPE3, i32([0, -1]), label="keep_dims"),
    case("SparseAdd", lambda ai, av, ash, bi, bv, bsh, th: ops.sparse_add(ai, av, ash, bi, bv, bsh, th),
         IDX, signed(5), SHAPE, i64([[0, 2], [1, 1], [2, 3]]), signed(3), SHAPE, 0.1),
    case("SparseDenseCwiseMul", lambda i, v, s, d: ops.sparse_dense_cwise_mul(i, v, s, d),
         IDX, signed(5), SHAPE, signed(3, 4)),
    case("SparseDenseCwiseMul", lambda i, v, s, d: ops.sparse_dense_cwise_mul(i, v, s, d),
         IDX3, signed(6), SHAPE3, signed(3, 1), label="broadcast"),
    # TF's registered gradient of SparseDenseCwiseAdd raises NotImplementedError, and those of
    # SparseSparseMaximum/Minimum a TypeError (they take 2 arguments, TF passes 3): the bridge
    # registers none, so it raises the LookupError of an op without a gradient.
    case("SparseDenseCwiseAdd", lambda i, v, s, d: ops.sparse_dense_cwise_add(i, v, s, d),
         IDX, signed(5), SHAPE, signed(3, 4), dtypes=["float64"],
         raises=Raises("NotImplementedError: Gradient for SparseDenseCwiseAdd is not implemented.", LookupError,
                       _NO_GRADIENT.format("SparseDenseCwiseAdd"))),
    case("SparseSparseMaximum", lambda ai, av, ash, bi, bv: ops.sparse_sparse_maximum(ai, av, ash, bi, bv, ash)[1],
         IDX, signed(5), SHAPE, IDX, signed(5), dtypes=["float64"],
         raises=Raises("TypeError: _SparseSparseMaximumGrad() takes 2 positional arguments but 3 were given",
                       LookupError, _NO_GRADIENT.format("SparseSparseMaximum"))),
    case("SparseSparseMinimum", lambda ai, av, ash, bi, bv: ops.sparse_sparse_minimum(ai, av, ash, bi, bv, ash)[1],
         IDX, signed(5), SHAPE, IDX, signed(5), dtypes=["float64"],
         raises=Raises("TypeError: _SparseSparseMinimumGrad() takes 2 positional arguments but 3 were given",
                       LookupError, _NO_GRADIENT.format("SparseSparseMinimum"))),
    case("SparseDenseCwiseDiv", lambda i, v, s, d: ops.sparse_dense_cwise_div(i, v, s, d),
         IDX, signed(5), SHAPE, signed(3, 4)),
    case("SparseDenseCwiseDiv", lambda i, v, s, d: ops.sparse_dense_cwise_div(i, v, s, d),
         IDX3, signed(6), SHAPE3, signed(4), label="broadcast"),
    case("SparseFillEmptyRows", lambda i, v, s, d: ops.sparse_fill_empty_rows(i, v, s, d),
         IDX, signed(5), i64([4, 4]), 0.5),
    case("SparseReorder", lambda i, v, s: ops.sparse_reorder(i, v, s), IDX_UNORDERED, signed(5), SHAPE),
    case("SparseSlice", lambda i, v, s, b, z: ops.sparse_slice(i, v, s, b, z),
         IDX3, signed(6), SHAPE3, i64([0, 1, 0]), i64([2, 2, 3])),
    case("SparseSoftmax", lambda i, v, s: ops.sparse_softmax(i, v, s), IDX, signed(5), SHAPE),
    case("SparseSoftmax", lambda i, v, s: ops.sparse_softmax(i, v, s), IDX3, signed(6), SHAPE3, label="rank3"),
    case("SparseTensorDenseAdd", lambda i, v, s, d: ops.sparse_tensor_dense_add(i, v, s, d),
         IDX, signed(5), SHAPE, signed(3, 4)),
    case("SparseToDense", lambda i, s, v, d: ops.sparse_to_dense(i, s, v, d), IDX, SHAPE, signed(5), 0.3),
    # --- CSR sparse matrices: values in, through the CSR variant, dense out -------------------
    case("DenseToCSRSparseMatrix", lambda x, i: _to_dense(ops.dense_to_csr_sparse_matrix(x, i), x.dtype),
         signed(3, 4), IDX),
    case("CSRSparseMatrixToDense", lambda i, v, s: _to_dense(_csr(i, v, s), v.dtype), IDX, signed(5), SHAPE,
         dtype_attr="type"),
    case("CSRSparseMatrixToDense", lambda i, v, s: _to_dense(_csr(i, v, s), v.dtype), IDX3, cplx(6), SHAPE3,
         dtype_attr="type", label="batched_complex"),
    case("SparseTensorToCSRSparseMatrix",
         lambda i, v, s: ops.csr_sparse_matrix_to_sparse_tensor(_csr(i, v, s), type_=v.dtype), IDX, signed(5), SHAPE),
    case("CSRSparseMatrixToSparseTensor",
         lambda x, i: ops.csr_sparse_matrix_to_sparse_tensor(ops.dense_to_csr_sparse_matrix(x, i), type_=x.dtype),
         signed(2, 3, 4), IDX3, dtype_attr="type"),
    case("SparseMatrixAdd",
         lambda ai, av, bi, bv, s, alpha, beta: _to_dense(
             ops.sparse_matrix_add(_csr(ai, av, s), _csr(bi, bv, s), alpha, beta), av.dtype, [3, 4]),
         IDX, signed(5), i64([[0, 2], [1, 1], [2, 3]]), signed(3), SHAPE, 0.7, -1.3),
    # TF's registered gradient raises a NotImplementedError without a message; the bridge has none.
    case("SparseMatrixMul", lambda i, v, s, b: _to_dense(ops.sparse_matrix_mul(_csr(i, v, s), b), v.dtype, [3, 4]),
         IDX, signed(5), SHAPE, signed(), dtypes=["float64"],
         raises=Raises("NotImplementedError: ", LookupError, _NO_GRADIENT.format("SparseMatrixMul"))),
    case("SparseMatrixMatMul", _smm(), IDX, signed(5), SHAPE, signed(4, 2), dtypes=REAL),
    case("SparseMatrixMatMul", _smm(transpose_a=True), IDX, signed(5), SHAPE, signed(3, 2), dtypes=REAL,
         label="transpose_a"),
    case("SparseMatrixMatMul", _smm(transpose_b=True), IDX, signed(5), SHAPE, signed(2, 4), dtypes=REAL,
         label="transpose_b"),
    case("SparseMatrixMatMul", _smm(transpose_output=True), IDX, signed(5), SHAPE, signed(4, 2), dtypes=REAL,
         label="transpose_output"),
    case("SparseMatrixMatMul", _smm(transpose_a=True, transpose_b=True, transpose_output=True),
         IDX, signed(5), SHAPE, signed(2, 3), dtypes=REAL, label="transpose_all"),
    case("SparseMatrixMatMul", _smm(), IDX3, signed(6), SHAPE3, signed(2, 4, 2), dtypes=REAL, label="batched"),
    case("SparseMatrixMatMul", _smm(), IDX, cplx(5), SHAPE, cplx(4, 2), label="complex"),
    case("SparseMatrixMatMul", _smm(adjoint_a=True), IDX, cplx(5), SHAPE, cplx(3, 2), label="adjoint_a"),
    case("SparseMatrixMatMul", _smm(adjoint_b=True, conjugate_output=True), IDX, cplx(5), SHAPE, cplx(2, 4),
         label="adjoint_b_conjugate_output"),
    case("SparseMatrixMatMul", _smm(adjoint_a=True, transpose_b=True), IDX, cplx(5), SHAPE, cplx(2, 3),
         label="adjoint_a_transpose_b"),
    case("SparseMatrixMatMul", _smm(transpose_a=True, adjoint_b=True, transpose_output=True),
         IDX, cplx(5), SHAPE, cplx(2, 3), label="transpose_a_adjoint_b_transpose_output"),
    case("SparseMatrixMatMul", _smm(adjoint_a=True, adjoint_b=True, transpose_output=True, conjugate_output=True),
         IDX, cplx(5), SHAPE, cplx(2, 3), label="adjoint_ab_transpose_output"),
    case("SparseMatrixSparseMatMul", _ssmm(), IDX, signed(5), SHAPE, IDX_T, signed(6), SHAPE_T, dtype_attr="type"),
    case("SparseMatrixSparseMatMul", _ssmm(transpose_a=True, transpose_b=True), IDX, signed(5), SHAPE,
         IDX_T2, signed(5), SHAPE_T, dtype_attr="type", label="transpose_ab"),
    case("SparseMatrixSparseMatMul", _ssmm(adjoint_b=True), IDX, cplx(5), SHAPE, IDX, cplx(5), SHAPE,
         dtype_attr="type", label="adjoint_b"),
    case("SparseMatrixSparseMatMul", _ssmm(adjoint_a=True, transpose_b=True), IDX, cplx(5), SHAPE,
         IDX_T2, cplx(5), SHAPE_T, dtype_attr="type", label="adjoint_a_transpose_b"),
    case("SparseMatrixSoftmax",
         lambda i, v, s: _to_dense(ops.sparse_matrix_softmax(_csr(i, v, s), type_=v.dtype), v.dtype, [2, 3, 4]),
         IDX3, signed(6), SHAPE3, dtype_attr="type"),
    case("SparseMatrixTranspose",
         lambda i, v, s: _to_dense(ops.sparse_matrix_transpose(_csr(i, v, s), type_=v.dtype), v.dtype),
         IDX, signed(5), SHAPE, dtype_attr="type"),
    case("SparseMatrixTranspose",
         lambda i, v, s: _to_dense(ops.sparse_matrix_transpose(_csr(i, v, s), type_=v.dtype, conjugate=True),
                                   v.dtype),
         IDX3, cplx(6), SHAPE3, dtype_attr="type", label="conjugate"),
    # Complex values (conjugation conventions).
    case("SparseReduceSum", lambda i, v, s, a: ops.sparse_reduce_sum(i, v, s, a), IDX, cplx(5), SHAPE, i32([0]),
         label="complex"),
    case("SparseFillEmptyRows", lambda i, v, s, d: ops.sparse_fill_empty_rows(i, v, s, d),
         IDX, cplx(5), i64([4, 4]), cplx(), label="complex"),
    case("SparseReorder", lambda i, v, s: ops.sparse_reorder(i, v, s), IDX_UNORDERED, cplx(5), SHAPE, label="complex"),
    case("SparseSlice", lambda i, v, s, b, z: ops.sparse_slice(i, v, s, b, z),
         IDX3, cplx(6), SHAPE3, i64([1, 0, 1]), i64([1, 3, 3]), label="complex"),
    case("SparseTensorDenseAdd", lambda i, v, s, d: ops.sparse_tensor_dense_add(i, v, s, d),
         IDX, cplx(5), SHAPE, cplx(3, 4), label="complex"),
    case("SparseToDense", lambda i, s, v, d: ops.sparse_to_dense(i, s, v, d), IDX, SHAPE, cplx(5), cplx(),
         label="complex"),
    case("RaggedTensorToTensor",
         lambda v, d, sp: ops.ragged_tensor_to_tensor(i64([4, 3]), v, d, [sp], row_partition_types=["ROW_SPLITS"]),
         cplx(7), cplx(), SPLITS, label="complex"),
    case("RaggedGather", lambda sp, v, i: ops.ragged_gather([sp], v, i, OUTPUT_RAGGED_RANK=1).output_dense_values,
         SPLITS, cplx(7, 2), i64([1, 3, 3]), label="complex"),
    # --- ragged tensors: (row partitions, flat values) ------------------------------------------
    case("RaggedTensorToTensor",
         lambda v, d, sp: ops.ragged_tensor_to_tensor(i64([4, 3]), v, d, [sp], row_partition_types=["ROW_SPLITS"]),
         signed(7), 0.5, SPLITS),
    case("RaggedTensorToTensor",
         lambda v, d, sp: ops.ragged_tensor_to_tensor(i64([-1, 2, 2]), v, d, [sp], row_partition_types=["ROW_SPLITS"]),
         signed(7, 2), signed(2), SPLITS, label="truncated_inner_dims"),
    case("RaggedTensorToTensor",
         lambda v, d, n, ids: ops.ragged_tensor_to_tensor(i64([-1, -1]), v, d, [n, ids],
                                                          row_partition_types=["FIRST_DIM_SIZE", "VALUE_ROWIDS"]),
         signed(7), 0.5, i64(5), i64([0, 0, 2, 2, 2, 3, 3]), label="value_rowids"),
    case("RaggedTensorToSparse", lambda sp, v: ops.ragged_tensor_to_sparse([sp], v), SPLITS, signed(7)),
    case("RaggedTensorToSparse", lambda s1, s2, v: ops.ragged_tensor_to_sparse([s1, s2], v),
         i64([0, 2, 3]), i64([0, 1, 4, 6]), signed(6, 2), label="nested"),
    case("RaggedGather", lambda sp, v, i: ops.ragged_gather([sp], v, i, OUTPUT_RAGGED_RANK=1).output_dense_values,
         SPLITS, signed(7), i64([3, 0, 2, 0])),
    case("RaggedGather",
         lambda s1, s2, v, i: ops.ragged_gather([s1, s2], v, i, OUTPUT_RAGGED_RANK=3).output_dense_values,
         i64([0, 2, 3, 5]), i64([0, 1, 4, 4, 6, 8]), signed(8, 2), i64([[2, 0], [1, 2]]), label="nested"),
    case("RaggedFillEmptyRows", lambda ids, v, n, d: ops.ragged_fill_empty_rows(ids, v, n, d),
         i64([0, 0, 2, 2, 3]), signed(5), i64(5), 0.5),
    case("RaggedTensorToVariant",
         lambda sp, v: ops.ragged_tensor_from_variant(
             ops.ragged_tensor_to_variant([sp], v, batched_input=False), input_ragged_rank=1,
             output_ragged_rank=1, Tvalues=v.dtype).output_dense_values,
         SPLITS, signed(7, 2)),
    case("RaggedTensorFromVariant",
         lambda sp, v: ops.ragged_tensor_from_variant(
             ops.ragged_tensor_to_variant([sp], v, batched_input=True), input_ragged_rank=0,
             output_ragged_rank=1, Tvalues=v.dtype).output_dense_values,
         SPLITS, signed(7)),
    case("RaggedTensorFromVariant",
         lambda s1, s2, v: ops.ragged_tensor_from_variant(
             ops.ragged_tensor_to_variant([s1, s2], v, batched_input=True), input_ragged_rank=1,
             output_ragged_rank=2, Tvalues=v.dtype).output_dense_values,
         i64([0, 2, 3]), i64([0, 1, 4, 6]), signed(6), label="nested"),
    # --- optionals and composite-tensor variants: components in and out of a variant -------------
    case("OptionalFromValue", lambda x: ops.optional_get_value(ops.optional_from_value([x]), output_types=[x.dtype],
                                                              output_shapes=[[2, 3]]),
         signed(2, 3), dtypes=("float64", "float32", "float16", "bfloat16", "complex128", "complex64")),
    case("OptionalGetValue",
         lambda x, y: ops.optional_get_value(ops.optional_from_value([x, y]), output_types=[x.dtype, y.dtype],
                                             output_shapes=[[3], [2, 2]])[1],
         signed(3), signed(2, 2), dtypes=("float64", "float32")),
    # The metadata (a serialized TypeSpecProto TF Python writes) is left empty: the kernels only carry it.
    case("CompositeTensorVariantFromComponents",
         lambda x, y: ops.composite_tensor_variant_to_components(
             ops.composite_tensor_variant_from_components([x, y], metadata=b""), metadata=b"",
             Tcomponents=[x.dtype, y.dtype]),
         signed(2, 3), signed(3), dtypes=("float64", "float32", "float16", "bfloat16", "complex128", "complex64")),
    case("CompositeTensorVariantToComponents",
         lambda x, y: ops.composite_tensor_variant_to_components(
             ops.composite_tensor_variant_from_components([x, y], metadata=b""), metadata=b"",
             Tcomponents=[x.dtype, y.dtype])[0],
         signed(2, 3), signed(3), dtypes=("float64", "float32")),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING: frozenset[str] = frozenset()
