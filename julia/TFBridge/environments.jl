# TFBridge: package environments (included by julia/TFBridge.jl, inside module TFBridge).
#
# Where Julia finds packages.  Julia reads JULIA_DEPOT_PATH, JULIA_LOAD_PATH
# and JULIA_PROJECT itself when it starts, embedded as on the command line
# (Base.__init__), so those keep their meaning here.  The bridge adds two
# things, and changes nothing else:
# - TFBRIDGE_JULIA_DEPOT: a read-only depot appended after the user's depots
#   (the first one must stay writable: Julia writes precompiled files there),
#   and its environments/v<major>.<minor> appended to the load path.  Done
#   by `__init__` (TFBridge.jl) in every process, so every way Julia starts
#   (bridge.julia.init and a kernel's lazy start, with TFBridge.jl included
#   or built into the system image) sees it.
# - op environments: customop.load stacks an op folder holding a
#   Project.toml on the load path (use_op_environment), after the user's
#   entries and before the extra depot's environment, so the op's own
#   Manifest.toml wins over that fallback.  Before the op's Julia file runs,
#   every package it imports at top level is looked up as `using` would, so a
#   missing one refuses the load before any of the op's code runs.

const EXTRA_DEPOT_VARIABLE = "TFBRIDGE_JULIA_DEPOT"

"""Load path entries added for the extra depot; op environments go before them."""
const EXTRA_ENVIRONMENTS = String[]

"""The environment folder of depot `depot` for this Julia (`environments/v1.5`)."""
depot_environment(depot::AbstractString) =
    joinpath(depot, "environments", "v$(VERSION.major).$(VERSION.minor)")

"""
Make the depot paths absolute (Julia resolves packages and precompiled files
against them; a relative one would change meaning with the working folder)
and append the depot named by TFBRIDGE_JULIA_DEPOT, once.
"""
function add_extra_depot!(value::AbstractString = get(ENV, EXTRA_DEPOT_VARIABLE, ""))
    map!(d -> abspath(expanduser(d)), DEPOT_PATH, DEPOT_PATH)
    isempty(value) && return nothing
    depot = abspath(expanduser(value))
    isdir(depot) || throw(ArgumentError(
        "$EXTRA_DEPOT_VARIABLE=$value: $depot is not a folder (expected a Julia depot, holding packages/)"))
    depot in DEPOT_PATH || push!(DEPOT_PATH, depot)
    env = depot_environment(depot)
    if isdir(env) && !(env in LOAD_PATH)
        push!(LOAD_PATH, env)
        push!(EXTRA_ENVIRONMENTS, env)
    end
    return nothing
end

has_project(dir::AbstractString) = any(name -> isfile(joinpath(dir, name)), ("JuliaProject.toml", "Project.toml"))

"""
Put the environment of op folder `dir` on LOAD_PATH (before the extra
depot's environment; once); true if it was added now.
"""
function add_op_environment!(dir::String)
    dir in LOAD_PATH && return false
    at = findfirst(in(EXTRA_ENVIRONMENTS), LOAD_PATH)
    insert!(LOAD_PATH, at === nothing ? length(LOAD_PATH) + 1 : at, dir)
    return true
end

"""The packages (first names of `using`/`import` paths) the parsed code `ex` imports unconditionally."""
function imported_packages!(names::Vector{String}, ex)
    ex isa Expr || return names
    if ex.head in (:using, :import)
        for arg in ex.args
            path = arg isa Expr && arg.head === :(:) ? arg.args[1] : arg   # `using A: f`
            path isa Expr && path.head === :. && !isempty(path.args) || continue
            root = path.args[1]
            # `.Local` is a module of the file's own; Base and Core are always there.
            root isa Symbol && !(root in (:., :Base, :Core, :Main)) && push!(names, String(root))
        end
    elseif ex.head in (:toplevel, :block)
        foreach(a -> imported_packages!(names, a), ex.args)
    elseif ex.head === :module
        imported_packages!(names, ex.args[3])
    end
    # Imports under `if`, `try`, functions... may be meant to fail: the file decides.
    return names
end

"""Why `using name` in Main would fail, or "" if it would not: Base.require's own two lookups."""
function package_problem(name::String)
    id = Base.identify_package(name)
    id === nothing && return "no environment on the load path lists it"
    haskey(Base.loaded_modules, id) && return ""
    Base.locate_package(id) === nothing &&
        return "an environment lists it ($(id.uuid)), but no Manifest.toml on the load path resolves it " *
               "to a copy in a depot (not installed, or its environment not instantiated)"
    return ""
end

"""
Stack the environment of op folder `dir`, if it has a Project.toml, and look
up the packages the Julia file `source` imports at top level.  Returns ""
when all of them load, else one line per missing package, "Name: why", and
then LOAD_PATH is left as it was.  Nothing of `source` is run (a syntax error
is left for `include` to report).
"""
function use_op_environment(dir::String, source::String)
    added = has_project(dir) && add_op_environment!(dir)
    ex = Base.parse_input_line(read(source, String); filename = source)
    lines = String[]
    for name in unique!(imported_packages!(String[], ex))
        why = package_problem(name)
        isempty(why) || push!(lines, "$name: $why")
    end
    isempty(lines) || !added || filter!(!=(dir), LOAD_PATH)
    return join(lines, "\n")
end

uuid_in(text::AbstractString, pattern::Regex) = (m = match(pattern, text); m === nothing ? "" : String(m[1]))

readdir_or_empty(dir::AbstractString) = isdir(dir) ? readdir(dir) : String[]

"""
The UUID of package `name`, from what this Julia can see: an environment on
the load path, the standard library, a registry or an installed copy in a
depot.  Also whether `using` could load it as things stand (a manifest on the
load path resolves it to an installed copy).  Returns "uuid loadable"
(loadable is true or false), or "" if Julia knows no such package.
"""
function package_uuid(name::String)
    Base.isidentifier(name) || return ""
    id = Base.identify_package(name)
    uuid = id === nothing || id.uuid === nothing ? "" : string(id.uuid)
    if isempty(uuid)
        stdlib = joinpath(Sys.STDLIB, name, "Project.toml")
        isfile(stdlib) && (uuid = uuid_in(read(stdlib, String), r"(?m)^uuid\s*=\s*\"([0-9a-f-]{36})\""))
    end
    for depot in DEPOT_PATH
        isempty(uuid) || break
        # An installed copy: packages/<name>/<slug>/Project.toml.
        for slug in readdir_or_empty(joinpath(depot, "packages", name))
            project = joinpath(depot, "packages", name, slug, "Project.toml")
            isfile(project) || continue
            uuid = uuid_in(read(project, String), r"(?m)^uuid\s*=\s*\"([0-9a-f-]{36})\"")
            isempty(uuid) || break
        end
        # A registry (a git clone, as Julia 1.5's Pkg keeps them): `<uuid> = { name = "<name>", ... }`.
        for registry in readdir_or_empty(joinpath(depot, "registries"))
            isempty(uuid) || break
            file = joinpath(depot, "registries", registry, "Registry.toml")
            isfile(file) || continue
            pattern = Regex("(?m)^\\s*([0-9a-f-]{36})\\s*=\\s*\\{\\s*name\\s*=\\s*\"" * name * "\"")
            uuid = uuid_in(read(file, String), pattern)
        end
    end
    isempty(uuid) && return ""
    loadable = Base.locate_package(Base.PkgId(Base.UUID(uuid), name)) !== nothing
    return "$uuid $loadable"
end

