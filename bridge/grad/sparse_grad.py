"""Gradients of sparse tensors and CSR sparse matrices, after TF's sparse_grad.py and sparse_csr_matrix_grad.py.

A sparse tensor is an (indices, values, dense_shape) triple: only its values
get a gradient, the indices and shapes None.
"""
from __future__ import annotations

from bridge.framework import dtypes
from bridge.framework.graph import Output
from ._helpers import _const, _node, _op
from .registry import NotDifferentiable, RegisterGradient

NotDifferentiable("SparseAddGrad")
NotDifferentiable("SparseConcat")


def _i32(value) -> Output:
    return _const(value, "int32")


def _column(indices: Output, k: int) -> Output:
    """Column k of an [n, rank] indices matrix."""
    return _op("GatherV2", [indices, _i32(k), _i32(1)])


def _conj(x: Output) -> Output:
    return _op("Conj", [x]) if x.dtype.is_complex else x


def _sum_all(x: Output) -> Output:
    return _op("Sum", [_op("Reshape", [x, _i32([-1])]), _i32(0)])


@RegisterGradient("SparseReorder")
def _sparse_reorder_grad(op, _indices_grad, values_grad):
    # Reorder the entry numbers 0..n-1 like the values: inverting that permutation undoes it.
    indices, _, shape = op.inputs
    n = _op("GatherV2", [_op("Shape", [indices]), _i32(0), _i32(0)])
    entries = _op("Range", [_i32(0), n, _i32(1)])
    ordered = _node("SparseReorder", [indices, entries, shape]).output(1)
    return None, _op("GatherV2", [values_grad, _op("InvertPermutation", [ordered]), _i32(0)]), None


@RegisterGradient("SparseAdd")
def _sparse_add_grad(op, *grads):
    # thresh only decides which sums are kept: sum_indices already tells.
    a_grad, b_grad = _node("SparseAddGrad", [grads[1], op.inputs[0], op.inputs[3], op.outputs[0]]).outputs
    return None, a_grad, None, None, b_grad, None, None


@RegisterGradient("SparseTensorDenseAdd")
def _sparse_tensor_dense_add_grad(op, grad):
    return None, _op("GatherNd", [grad, op.inputs[0]]), None, grad


@RegisterGradient("SparseReduceSum")
def _sparse_reduce_sum_grad(op, grad):
    # As Sum's gradient: reshape to the kept-dims shape, then each entry reads
    # the cell its index falls in (index // (shape // kept_shape)).
    indices, _, shape, axes = op.inputs
    rank = _op("Size", [shape])
    axes = _op("FloorMod", [_op("AddV2", [_op("Cast", [axes], {"DstT": rank.dtype}), rank]), rank])
    ones = _op("Fill", [_op("Shape", [axes]), _const(1, shape.dtype)])
    kept = _op("DynamicStitch", [[_op("Range", [_i32(0), rank, _i32(1)]), axes], [shape, ones]])
    scale = _op("FloorDiv", [shape, kept])
    return None, _op("GatherNd", [_op("Reshape", [grad, kept]), _op("FloorDiv", [indices, scale])]), None, None


@RegisterGradient("SparseSlice")
def _sparse_slice_grad(op, *grads):
    indices, _, _, start, _ = op.inputs
    return None, _op("SparseSliceGrad", [grads[1], indices, start, op.outputs[0]]), None, None, None


@RegisterGradient("SparseTensorDenseMatMul")
def _sparse_tensor_dense_mat_mul_grad(op, grad):
    indices, values, shape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    b_grad = _op("SparseTensorDenseMatMul", [indices, values, shape, grad], {"adjoint_a": not adj_a})
    if adj_b:
        b_grad = _conj(_op("Transpose", [b_grad, _i32([1, 0])]))
    # The gradient of entry (r, c) is row r of grad times column c of adjoint(op(b)),
    # with r and c swapped and the result conjugated if adj_a.
    rows, cols = _column(indices, 0), _column(indices, 1)
    parts_a = _op("GatherV2", [grad, cols if adj_a else rows, _i32(0)])
    b_rows = _op("Transpose", [b, _i32([1, 0])]) if adj_b else _conj(b)
    parts_b = _op("GatherV2", [b_rows, rows if adj_a else cols, _i32(0)])
    values_grad = _op("Sum", [_op("Mul", [parts_a, parts_b]), _i32(1)])
    return None, _conj(values_grad) if adj_a else values_grad, None, b_grad


def _sparse_dense_cwise_mul_or_div_grad(op, grad, is_mul):
    # The dense operand broadcasts to the sparse shape: each entry reads the
    # dense cell its index // (x_shape // padded y_shape) names, on y's last dims.
    x_indices, x_values, x_shape, y = op.inputs
    y_shape = _op("Shape", [y], {"out_type": x_shape.dtype})
    added = _op("ExpandDims", [_op("Sub", [_op("Size", [x_shape]), _op("Size", [y_shape])]), _i32(0)])
    padded_y_shape = _op("ConcatV2", [[_op("Fill", [added, _const(1, x_shape.dtype)]), y_shape], _i32(0)])
    scaled = _op("FloorDiv", [x_indices, _op("FloorDiv", [x_shape, padded_y_shape])])
    scaled = _op("Slice", [scaled, _op("ConcatV2", [[_i32([0]), added], _i32(0)]), _i32([-1, -1])])
    dense = _op("GatherNd", [y, scaled])
    if is_mul:
        dx, dy_values = _op("Mul", [grad, dense]), _op("Mul", [grad, x_values])
    else:
        dx = _op("RealDiv", [grad, dense])
        dy_values = _op("Mul", [grad, _op("RealDiv", [_op("Neg", [x_values]), _op("Square", [dense])])])
    # Indices can repeat after scaling: SparseTensorDenseAdd sums them (SparseToDense would not).
    dy = _op("SparseTensorDenseAdd", [scaled, dy_values, y_shape, _op("ZerosLike", [y])])
    return None, dx, None, dy


@RegisterGradient("SparseDenseCwiseMul")
def _sparse_dense_cwise_mul_grad(op, grad):
    return _sparse_dense_cwise_mul_or_div_grad(op, grad, True)


@RegisterGradient("SparseDenseCwiseDiv")
def _sparse_dense_cwise_div_grad(op, grad):
    return _sparse_dense_cwise_mul_or_div_grad(op, grad, False)


@RegisterGradient("SparseSoftmax")
def _sparse_softmax_grad(op, grad):
    # As SoftmaxGrad over the entries present: (grad - sum(grad * softmax, -1)) * softmax.
    indices, _, shape = op.inputs
    softmax = op.outputs[0]
    row_sums = _op("SparseReduceSum", [indices, _op("Mul", [softmax, grad]), shape, _i32([-1])],
                   {"keep_dims": True})
    shifted = _op("SparseDenseCwiseAdd", [indices, grad, shape, _op("Neg", [row_sums])])
    return None, _op("Mul", [shifted, softmax]), None


@RegisterGradient("SparseFillEmptyRows")
def _sparse_fill_empty_rows_grad(op, _indices_grad, values_grad, _indicator_grad, _map_grad):
    d_values, d_default = _node("SparseFillEmptyRowsGrad", [op.outputs[3], values_grad]).outputs
    return None, d_values, None, d_default


@RegisterGradient("SparseToDense")
def _sparse_to_dense_grad(op, grad):
    indices = op.inputs[0]
    values_grad = _op("GatherNd", [grad, indices])
    default_grad = _op("Sub", [_sum_all(grad), _sum_all(values_grad)])
    return None, None, values_grad, default_grad


# --- CSR sparse matrices (variant tensors) ------------------------------------------------------
NotDifferentiable("SparseMatrixNNZ")
NotDifferentiable("SparseMatrixZeros")


def _csr_to_coo(csr: Output, dtype) -> list[Output]:
    """(indices, values, dense_shape) of a CSR matrix."""
    return _node("CSRSparseMatrixToSparseTensor", [csr], {"type": dtype}).outputs


def _coo_to_csr(indices: Output, values: Output, shape: Output) -> Output:
    return _op("SparseTensorToCSRSparseMatrix", [indices, values, shape])


def _csr_conj(csr: Output, dtype) -> Output:
    # Conj of a CSR variant conjugates its values: nothing to do for real ones.
    return _op("Conj", [csr]) if dtype.is_complex else csr


def _prune_csr(unpruned: Output, pattern: Output, dtype) -> Output:
    """The entries of CSR ``unpruned`` at the positions of CSR ``pattern`` (all of them present in unpruned)."""
    u_indices, u_values, u_shape = _csr_to_coo(unpruned, dtype)
    p_indices, _, p_shape = _csr_to_coo(pattern, dtype)

    def flat(indices, shape):  # row-major positions, sorted as CSR entries are
        linear = _node("SparseReshape", [indices, shape, _const([-1], "int64")]).output(0)
        return _column(linear, 0)

    u_flat, p_flat = flat(u_indices, u_shape), flat(p_indices, p_shape)
    best = _op("Reshape", [_op("LowerBound", [_op("Reshape", [u_flat, _i32([1, -1])]),
                                              _op("Reshape", [p_flat, _i32([1, -1])])],
                               {"out_type": dtypes.int32}), _i32([-1])])
    found = _op("Where", [_op("Equal", [_op("GatherV2", [u_flat, best, _i32(0)]), p_flat])])
    keep = _op("GatherV2", [best, found, _i32(0)])
    return _coo_to_csr(_op("GatherNd", [u_indices, keep]), _op("GatherNd", [u_values, keep]), p_shape)


def _pruned_dense_matmul(a: Output, b: Output, indices: Output, transpose_a=False, adjoint_a=False,
                         transpose_b=False, adjoint_b=False) -> Output:
    """op(a) @ op(b) as a CSR matrix, computed only at ``indices`` (rank 2 or batched rank 3)."""
    transpose_a, transpose_b = transpose_a or adjoint_a, transpose_b or adjoint_b
    if adjoint_a:
        a = _conj(a)
    if adjoint_b:
        b = _conj(b)
    rank = len(a.shape)
    a_shape = _op("Shape", [a], {"out_type": dtypes.int64})
    b_shape = _op("Shape", [b], {"out_type": dtypes.int64})
    dims = [_op("GatherV2", [a_shape, _i32([rank - 1 if transpose_a else rank - 2]), _i32(0)]),
            _op("GatherV2", [b_shape, _i32([rank - 2 if transpose_b else rank - 1]), _i32(0)])]
    if rank == 2:
        rows, cols = _column(indices, 0), _column(indices, 1)
        perm, gather = _i32([1, 0]), (lambda x, i: _op("GatherV2", [x, i, _i32(0)]))
    else:
        dims.insert(0, _op("GatherV2", [a_shape, _i32([0]), _i32(0)]))
        rows = _op("GatherV2", [indices, _i32([0, 1]), _i32(1)])
        cols = _op("GatherV2", [indices, _i32([0, 2]), _i32(1)])
        perm, gather = _i32([0, 2, 1]), (lambda x, i: _op("GatherNd", [x, i]))
    a_rows = gather(_op("Transpose", [a, perm]) if transpose_a else a, rows)
    b_cols = gather(b if transpose_b else _op("Transpose", [b, perm]), cols)
    values = _op("Sum", [_op("Mul", [a_rows, b_cols]), _i32(1)])
    return _coo_to_csr(indices, values, _op("ConcatV2", [dims, _i32(0)]))


@RegisterGradient("DenseToCSRSparseMatrix")
def _dense_to_csr_grad(op, grad):
    return _op("CSRSparseMatrixToDense", [grad], {"type": op.get_attr("T")}), None


@RegisterGradient("CSRSparseMatrixToDense")
def _csr_to_dense_grad(op, grad):
    indices = _csr_to_coo(op.inputs[0], grad.dtype)[0]
    return _coo_to_csr(indices, _op("GatherNd", [grad, indices]), _op("Shape", [grad], {"out_type": dtypes.int64}))


@RegisterGradient("SparseTensorToCSRSparseMatrix")
def _sparse_tensor_to_csr_grad(op, grad):
    return None, _csr_to_coo(grad, op.get_attr("T"))[1], None


@RegisterGradient("CSRSparseMatrixToSparseTensor")
def _csr_to_sparse_tensor_grad(op, *grads):
    return _coo_to_csr(op.outputs[0], grads[1], op.outputs[2])


@RegisterGradient("SparseMatrixAdd")
def _sparse_matrix_add_grad(op, grad):
    # alpha * A + beta * B: A and B get alpha * grad and beta * grad at their own
    # entries; like TF, no gradient for alpha and beta.
    a, b, alpha, beta = op.inputs
    dtype = op.get_attr("T")
    return (_op("SparseMatrixMul", [_prune_csr(grad, a, dtype), alpha]),
            _op("SparseMatrixMul", [_prune_csr(grad, b, dtype), beta]), None, None)


@RegisterGradient("SparseMatrixTranspose")
def _sparse_matrix_transpose_grad(op, grad):
    return _op("SparseMatrixTranspose", [grad], {"type": op.get_attr("type"), "conjugate": op.get_attr("conjugate")})


@RegisterGradient("SparseMatrixSoftmax")
def _sparse_matrix_softmax_grad(op, grad):
    return _op("SparseMatrixSoftmaxGrad", [op.outputs[0], grad], {"type": op.get_attr("type")})


def _product_flags(op) -> tuple[bool, bool, bool, bool]:
    """transpose_a, transpose_b, adjoint_a, adjoint_b of a CSR product."""
    return tuple(op.get_attr(f) for f in ("transpose_a", "transpose_b", "adjoint_a", "adjoint_b"))


@RegisterGradient("SparseMatrixMatMul")
def _sparse_matrix_mat_mul_grad(op, grad):
    # C = opA(A) opB(B), or its transpose if transpose_output; A is CSR, B dense.
    # The branches follow TF's sparse_csr_matrix_grad.py; A's gradient is only
    # computed at A's entries.
    t_a, t_b, adj_a, adj_b = _product_flags(op)
    dtype = op.get_attr("T")
    a, b = op.inputs
    a_indices = _csr_to_coo(a, dtype)[0]

    def matmul(x, y, **flags):
        return _pruned_dense_matmul(x, y, a_indices, **flags)

    def sparse_matmul(x, y, **flags):
        return _op("SparseMatrixMatMul", [x, y], flags)

    if op.get_attr("conjugate_output"):
        grad = _conj(grad)
    if not op.get_attr("transpose_output"):
        if not adj_a and not adj_b:
            a, b = _csr_conj(a, dtype), _conj(b)
            grad_a = (matmul(grad, b, transpose_b=not t_b) if not t_a else
                      matmul(b, grad, transpose_a=t_b, transpose_b=True))
            grad_b = sparse_matmul(a, grad, transpose_a=not t_a, transpose_output=t_b)
        elif not t_a and not t_b:
            grad_a = (matmul(grad, b, adjoint_b=not adj_b) if not adj_a else
                      matmul(b, grad, adjoint_a=adj_b, adjoint_b=True))
            grad_b = sparse_matmul(a, grad, adjoint_a=not adj_a, transpose_output=adj_b, conjugate_output=adj_b)
        elif adj_a and t_b:
            grad_a = matmul(b, grad, transpose_a=True, adjoint_b=True)
            grad_b = sparse_matmul(a, grad, transpose_output=True)
        else:  # t_a and adj_b
            grad_a = matmul(b, grad, transpose_a=True, transpose_b=True)
            grad_b = sparse_matmul(_csr_conj(a, dtype), grad, transpose_output=True, conjugate_output=True)
    else:
        if not adj_a and not adj_b:
            a, b = _csr_conj(a, dtype), _conj(b)
            grad_a = (matmul(grad, b, transpose_a=True, transpose_b=not t_b) if not t_a else
                      matmul(b, grad, transpose_a=t_b))
            grad_b = sparse_matmul(a, grad, transpose_a=not t_a, transpose_b=True, transpose_output=t_b)
        elif not t_a and not t_b:
            grad_a = (matmul(grad, b, transpose_a=True, adjoint_b=not adj_b) if not adj_a else
                      matmul(b, _conj(grad), adjoint_a=adj_b))
            grad_b = sparse_matmul(a, grad, adjoint_a=not adj_a, transpose_b=True, transpose_output=adj_b,
                                   conjugate_output=adj_b)
        elif adj_a and t_b:
            grad_a = matmul(b, _conj(grad), transpose_a=True)
            grad_b = sparse_matmul(a, grad, transpose_b=True, transpose_output=True)
        else:  # t_a and adj_b
            grad_a = matmul(b, grad, transpose_a=True)
            grad_b = sparse_matmul(a, grad, adjoint_b=True, transpose_output=True)
    return grad_a, grad_b


@RegisterGradient("SparseMatrixSparseMatMul")
def _sparse_matrix_sparse_mat_mul_grad(op, grad):
    # C = opA(A) opB(B) with A, B and C CSR: the dense-pattern products, pruned
    # to A's and B's entries (TF's branches).
    t_a, t_b, adj_a, adj_b = _product_flags(op)
    dtype = op.get_attr("type")
    a, b = op.inputs

    def matmul(x, y, **flags):
        return _op("SparseMatrixSparseMatMul", [x, y], {"type": dtype, **flags})

    def conj(x):
        return _csr_conj(x, dtype)

    if not t_a and not t_b:
        if not adj_a:
            if not adj_b:
                grad_a, grad_b = matmul(grad, b, adjoint_b=True), matmul(a, grad, adjoint_a=True)
            else:
                grad_a, grad_b = matmul(grad, b), matmul(grad, a, adjoint_a=True)
        elif not adj_b:
            grad_a, grad_b = matmul(b, grad, adjoint_b=True), matmul(a, grad)
        else:
            grad_a = matmul(b, grad, adjoint_a=True, adjoint_b=True)
            grad_b = matmul(grad, a, adjoint_a=True, adjoint_b=True)
    elif not adj_a and not adj_b:
        if not t_a and t_b:
            grad_a, grad_b = matmul(grad, conj(b)), matmul(grad, conj(a), transpose_a=True)
        elif t_a and not t_b:
            grad_a, grad_b = matmul(conj(b), grad, transpose_b=True), matmul(conj(a), grad)
        else:
            grad_a = matmul(b, grad, adjoint_a=True, transpose_b=True)
            grad_b = matmul(grad, a, transpose_a=True, adjoint_b=True)
    elif adj_a and t_b:
        grad_a = matmul(b, grad, transpose_a=True, adjoint_b=True)
        grad_b = matmul(grad, a, transpose_a=True, transpose_b=True)
    else:  # t_a and adj_b
        grad_a = matmul(b, grad, transpose_a=True, transpose_b=True)
        grad_b = matmul(grad, a, adjoint_a=True, transpose_b=True)
    return _prune_csr(grad_a, a, dtype), _prune_csr(grad_b, b, dtype)
