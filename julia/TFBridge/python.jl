# TFBridge: Python host (included by julia/TFBridge.jl, inside module TFBridge).
#
# The runtime (kernels_cpp/src/tfjl_runtime), found by its soname: it is
# loaded in every process that runs this module.
const RUNTIME_LIBRARY = "libtfjl_runtime.so"

"""
    with_gil(f)

Call `f()` holding Python's global interpreter lock, and return its value.
Julia code that calls into Python's C API (a `ccall` of a `Py*` function, a
Python bridge package) must do it inside `with_gil`: Julia ops and
`bridge.julia` calls do not hold the lock (unless TFBRIDGE_JULIA_GIL=1), so
that Python threads keep running while Julia computes.  Without Python in
the process it just calls `f()`.  Nestable.
"""
function with_gil(f)
    token = ccall((:tfjl_gil_acquire, RUNTIME_LIBRARY), Cint, ())
    try
        return f()
    finally
        ccall((:tfjl_gil_release, RUNTIME_LIBRARY), Cvoid, (Cint,), token)
    end
end

"""Evaluate every top-level expression of `code` in Main; the last value."""
eval_code(code::String) = include_string(Main, code, "bridge.julia.eval")

eval_repr(code::String) = Base.invokelatest(repr, eval_code(code))

function include_file(path::String)
    Base.include(Main, path)
    return nothing
end

# What the C side converts to Python objects; anything else becomes PyRepr.
struct PyRepr
    text::String
end

struct PyBigInt
    decimal::String
end

"""A numeric array copied into row-major (TF/numpy index) order."""
struct PyArray
    typestr::String        # numpy dtype string, e.g. "<f8"
    dims::Vector{Int64}    # TF index order
    data::Array            # contiguous, elements in row-major order
    nbytes::Int
end

numpy_typestr(::Type) = nothing
for (T, s) in ((Float64, "<f8"), (Float32, "<f4"), (Float16, "<f2"),
               (Int8, "|i1"), (Int16, "<i2"), (Int32, "<i4"), (Int64, "<i8"),
               (UInt8, "|u1"), (UInt16, "<u2"), (UInt32, "<u4"), (UInt64, "<u8"),
               (Bool, "|b1"), (ComplexF32, "<c8"), (ComplexF64, "<c16"))
    @eval numpy_typestr(::Type{$T}) = $s
end

py_value(x) = PyRepr(repr(x))
py_value(::Nothing) = nothing
py_value(x::Bool) = x
py_value(x::Integer) = typemin(Int64) <= x <= typemax(Int64) ? Int64(x) : PyBigInt(string(x))
py_value(x::AbstractFloat) = Float64(x)
py_value(x::AbstractString) = String(x)

function py_value(x::AbstractArray{T,N}) where {T,N}
    typestr = numpy_typestr(T)
    typestr === nothing && return PyRepr(repr(x))
    data = row_major(x)
    return PyArray(typestr, collect(Int64, size(x)), data, sizeof(data))
end

"""A fresh contiguous Array whose memory lists `x` in row-major order."""
row_major(x::AbstractArray{T,N}) where {T,N} =
    N <= 1 ? collect(x) : permutedims(x, ntuple(i -> N + 1 - i, N))
