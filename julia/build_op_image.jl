# Julia's system image with TFBridge, the packages some ops use and the
# compiled code of a run of those ops (docs/internals/julia-start.md; run by
# bridge/julia/opimage.py), as PackageCompiler builds for newer Julias:
#
#   julia --startup-file=no --output-o <image>.o -J <stock sys.so> build_op_image.jl <TFBridge.jl> <plan>
#
# The plan has one item a line: `environment <dir>` (an op folder's own
# environment, stacked as customop.load does), `package <uuid> <name>` (loaded
# into the image), `include <file>` (a module of julia/ that customop.load
# includes into TFBridge, ForwardDiffGradients.jl for `@gradient forwarddiff`:
# built in, it keeps its compiled code, and load finds it there) and
# `statements <file>` (precompile statements traced with --trace-compile from
# a run of the ops).  The ops' Julia files are not
# included here: customop.load includes them at every load, which defines
# their functions (and closures) anew, so only code that does not mention
# them (the packages', Base's and TFBridge's, for the argument types the run
# used) is worth keeping, and a statement that names Main's functions fails
# to resolve and is skipped.
Base.include(Main, joinpath(@__DIR__, "build_image.jl"))  # TFBridge, as in the plain image (ARGS[1])

# This process's load path, as bridge.julia.init's would be: the user's
# environment variables, TFBRIDGE_JULIA_DEPOT, the ops' environments.
Base.init_depot_path()
Base.init_load_path()
Main.TFBridge.add_extra_depot!()
import Random
Random.__init__()  # packages' top-level code may draw random numbers (MacroTools shuffles)

const PLAN = [split(line, ' '; limit = 2) for line in eachline(ARGS[2]) if !isempty(line)]
for item in PLAN
    item[1] == "environment" && Main.TFBridge.add_op_environment!(String(item[2]))
end
for item in PLAN
    if item[1] == "package"
        uuid, name = split(item[2], ' '; limit = 2)
        Base.require(Base.PkgId(Base.UUID(uuid), String(name)))
    end
end

for item in PLAN
    item[1] == "include" && Base.include(Main.TFBridge, String(item[2]))
end

let compiled = 0, skipped = 0
    for item in PLAN, line in (item[1] == "statements" ? eachline(item[2]) : ())
        startswith(line, "precompile(") || continue
        try
            ex = Meta.parse(line)
            Core.eval(Main, ex) === true ? (compiled += 1) : (skipped += 1)
        catch
            skipped += 1  # names Main's functions (or a type this process lacks)
        end
    end
    println("precompile statements: $compiled compiled, $skipped skipped")
end

# Nothing of this process may stay in the image: the load path, the extra
# depot's entries, and Random's open /dev/urandom (an IOStream whose file
# descriptor would be stale in every process started from the image; left
# unassigned, Random opens it again when first needed).
for ref in (Random.DEV_RANDOM, Random.DEV_URANDOM)
    isassigned(ref) && unsafe_store!(Ptr{Ptr{Cvoid}}(pointer_from_objref(ref)), C_NULL)
end
empty!(Main.TFBridge.EXTRA_ENVIRONMENTS)
empty!(LOAD_PATH)
empty!(DEPOT_PATH)
