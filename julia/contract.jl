# Generated from bridge/julia/contract.py by `make contract`; do not edit.
#
# The Julia-op contract (kernels_cpp/include/tfjl/CONTRACT.md), included into
# module TFBridge: the same table as kernels_cpp/include/tfjl/contract.h.

# tfjl::DType: the Julia element type of code c is DTYPES[c + 1].
const DTYPES = (Float64, Float32, Int32, Int64, Bool, String, ComplexF32, ComplexF64)

# Error kinds (tfjl::ErrorKind): what a Failure carries and a compiled entry returns.
#   OK: success
#   INVALID_ARGUMENT: ArgumentError, DimensionMismatch, DomainError, BoundsError, a MethodError on
#     the called function, a write into an input, or arguments and dynamic outputs the runtime
#     cannot pass
#   NOT_FOUND: the Julia function is not defined
#   INTERNAL: anything else, or Julia could not start
#   RESOURCE_EXHAUSTED: out of memory: Julia's OutOfMemoryError (in the function, or while the
#     runtime wraps its arguments), or an output's allocator
#   FAILED_PRECONDITION: Julia cannot run in this process: it was forked from one that runs Julia
const OK                  = 0
const INVALID_ARGUMENT    = 1
const NOT_FOUND           = 2
const INTERNAL            = 3
const RESOURCE_EXHAUSTED  = 4
const FAILED_PRECONDITION = 5

# The TF_Code of the kernel's status for kind k: TF_CODES[k + 1].
const TF_CODES = (0, 3, 5, 13, 8, 9)

# A compiled entry's parameters, f(data, ints, floats)::Cint:
#   data: per tensor its buffer; per string attribute its bytes
#   ints: per tensor its rank, then its TF (row-major) shape; per int or bool attribute its value;
#     per string attribute its length
#   floats: per float attribute its value
const EntryData   = Ptr{Ptr{Cvoid}}
const EntryInts   = Ptr{Int64}
const EntryFloats = Ptr{Float64}
const ENTRY_PARAMETER_TYPES = (EntryData, EntryInts, EntryFloats)
const EntryResult = Cint
