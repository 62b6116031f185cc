"""Julia's packages inside ops (issue 14).

- Julia finds packages the Julia way: JULIA_DEPOT_PATH, JULIA_LOAD_PATH and
  JULIA_PROJECT as the user set them, plus TFBRIDGE_JULIA_DEPOT (a read-only
  depot appended after the user's, its environment appended to the load
  path), whether Python starts Julia or a kernel starts it lazily.
- Real packages from that depot in ops: a backward function that is
  ForwardDiff over the op's forward function, Jacobians through such an op
  against TensorFlow's own gradients, SpecialFunctions' values and derivatives.
- Per-op environments: an op folder's Project.toml stacked on the load path,
  a missing package refused before any of the op's code runs, and the
  `tfbridge customop init --with-package` scaffold.

The tests that need real packages use the depot named by TFBRIDGE_JULIA_DEPOT,
which `make test` sets (to ../shared/julia-depot, or the mirror of it that the
Makefile makes when its symbolic links are missing).  Without it they are
skipped, saying how to get it; with it set they must pass.  The first use of
ForwardDiff precompiles 19 packages into the first (writable) depot, about a
minute; later runs take seconds.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, julia, ops
from support.build import op_folder
from support import REPO
from support.cli import tfbridge
from support.docs import block


DEPOT = os.environ.get("TFBRIDGE_JULIA_DEPOT", "")
JULIA_VERSION_DIR = "v1.5"  # Debian's Julia 1.5.3 (julia/install-julia.sh); the first test checks it
TIMEOUT = 900  # a child that precompiles SpecialFunctions from scratch takes about a minute
HOW_TO_GET = ("Julia does not find ForwardDiff and SpecialFunctions: run the tests through `make test`, which "
              "sets TFBRIDGE_JULIA_DEPOT to ../shared/julia-depot, or set TFBRIDGE_JULIA_DEPOT to a Julia "
              "depot holding them (docs/guides/julia-packages.md)")

UUIDS = {"SpecialFunctions": "276daf66-3868-5448-9aa4-cd146d93841b",
         "StaticArrays": "90137ffa-7385-5640-81b9-e52037218182"}


def _child(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python (its own Julia) with the bridge's variables
    of this process removed and ``env`` set; a crash or hang fails one test."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("TFBRIDGE_JULIA", "JULIA_DEPOT_PATH", "JULIA_LOAD_PATH", "JULIA_PROJECT"))}
    environ.update(env, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=cwd, env=environ)


def _last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fake_depot(path: Path) -> Path:
    """An empty depot with an (empty) environment for this Julia."""
    (path / "packages").mkdir(parents=True)
    (path / "environments" / JULIA_VERSION_DIR).mkdir(parents=True)
    (path / "environments" / JULIA_VERSION_DIR / "Project.toml").write_text("[deps]\n")
    return path


# A child's last line: its Julia's depots, load path and active project, and the variable as it ended up.
PATHS_JSON = ('print(json.dumps({"depots": julia.eval(\'join(Base.DEPOT_PATH, "|")\').split("|"), '
              '"load_path": julia.eval(\'join(Base.LOAD_PATH, "|")\').split("|"), '
              '"project": julia.eval(\'something(Base.active_project(), "")\'), '
              '"variable": os.environ.get("TFBRIDGE_JULIA_DEPOT")}))')


# ---------------------------------------------------------------- finding packages the Julia way

def test_embedded_julia_honours_the_users_depot_load_path_and_project(tmp_path):
    first = tmp_path / "my-depot"
    project = tmp_path / "proj"
    project.mkdir()
    (project / "Project.toml").write_text('name = "Proj"\n[deps]\n')
    code = f"""
        import json, os
        from bridge import julia
        julia.init()
        assert julia.eval('VERSION.major == 1 && "v$(VERSION.major).$(VERSION.minor)"') == {JULIA_VERSION_DIR!r}
        {PATHS_JSON}
    """
    got = _last_json(_child(code, tmp_path, JULIA_DEPOT_PATH=f"{first}:rel-depot",
                            JULIA_LOAD_PATH=f"@:{tmp_path / 'env'}:@stdlib", JULIA_PROJECT=str(project)))
    # A relative depot is made absolute (against the working folder at start-up).
    assert got["depots"] == [str(first), str(tmp_path / "rel-depot")]
    assert got["load_path"] == ["@", str(tmp_path / "env"), "@stdlib"]
    assert got["project"] == str(project / "Project.toml")
    assert got["variable"] is None


def test_extra_depot_is_appended_after_the_users_with_its_environment(tmp_path):
    depot = _fake_depot(tmp_path / "extra")
    code = f"""
        import json, os
        from bridge import julia
        julia.init()
        {PATHS_JSON}
    """
    # Relative, as a user may write it: made absolute for Julia and for child processes.
    got = _last_json(_child(code, tmp_path, TFBRIDGE_JULIA_DEPOT="extra",
                            JULIA_DEPOT_PATH=str(tmp_path / "mine"), JULIA_LOAD_PATH="@:@v#.#:@stdlib"))
    assert got["depots"] == [str(tmp_path / "mine"), str(depot)]
    assert got["load_path"] == ["@", "@v#.#", "@stdlib", str(depot / "environments" / JULIA_VERSION_DIR)]
    assert got["variable"] == str(depot)


def test_extra_depot_that_is_not_a_folder_is_refused_naming_the_variable(tmp_path):
    proc = _child("""
        from bridge import julia
        try:
            julia.init()
        except julia.JuliaError as exc:
            print("refused:", exc)
    """, tmp_path, TFBRIDGE_JULIA_DEPOT="no-such-depot")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused: TFBRIDGE_JULIA_DEPOT=no-such-depot" in proc.stdout
    assert str(tmp_path / "no-such-depot") in proc.stdout and "not a folder" in proc.stdout


def test_a_kernel_starting_julia_lazily_sets_up_the_same_paths(tmp_path):
    """No bridge.julia: the op's kernel (calling Base's copyto!, which Main
    sees) starts Julia with the TFBridge.jl built into the runtime, which
    appends the extra depot as bridge.julia.init would."""
    folder = op_folder(tmp_path, "PkgLazyCopy",
                       "PkgLazyCopy\n@forward copyto!\ndouble x(n)\ndouble y(n) -> output\n", "")
    library = customop.build(folder)
    depot = _fake_depot(tmp_path / "extra")
    code = f"""
        import json, os, sys
        import numpy as np
        import bridge
        ops = bridge.load_op_library({str(library)!r})
        g = bridge.Graph()
        with g.as_default():
            x = bridge.placeholder(bridge.float64, [3], name="x")
            y = ops.pkg_lazy_copy(x)
        with bridge.Session(g) as sess:
            assert list(sess.run(y, {{x: np.array([1.5, 2.5, 3.5])}})) == [1.5, 2.5, 3.5]
        assert "bridge.julia" not in sys.modules
        from bridge import julia   # joins the Julia the kernel started
        julia.init()
        assert julia.call_counts()[1] >= 1
        {PATHS_JSON}
    """
    got = _last_json(_child(code, tmp_path, TFBRIDGE_JULIA_DEPOT="extra",
                            JULIA_DEPOT_PATH=str(tmp_path / "mine"), JULIA_LOAD_PATH="@:@stdlib"))
    assert got["depots"] == [str(tmp_path / "mine"), str(depot)]
    assert got["load_path"] == ["@", "@stdlib", str(depot / "environments" / JULIA_VERSION_DIR)]


# ---------------------------------------------------------------- real packages in ops

@pytest.fixture(scope="module")
def packages():
    """This process's Julia loads ForwardDiff and SpecialFunctions (skip where
    no depot provides them; fail where TFBRIDGE_JULIA_DEPOT says one does)."""
    julia.init()
    found = julia.eval('all(p -> Base.find_package(p) !== nothing, ["ForwardDiff", "SpecialFunctions"])')
    if not found:
        depots = julia.eval('join(Base.DEPOT_PATH, ", ")')
        assert not DEPOT, (f"TFBRIDGE_JULIA_DEPOT={DEPOT} is set, but Julia finds no ForwardDiff or "
                           f"SpecialFunctions there (depots: {depots})")
        pytest.skip(HOW_TO_GET)
    julia.eval("import ForwardDiff, SpecialFunctions")  # the first time: precompiles them (about a minute)


# The example of docs/guides/julia-packages.md, run as written: a backward
# function that is ForwardDiff over the forward function, no hand-written gradient.
FD_SPEC = block("docs/guides/julia-packages.md", "", "Smooth\n")
FD_JULIA = block("docs/guides/julia-packages.md", "julia", "smooth_grad")


@pytest.fixture(scope="module")
def fd_model(packages, tmp_path_factory):
    return customop.load(op_folder(tmp_path_factory.mktemp("fd"), "Smooth", FD_SPEC, FD_JULIA)).smooth


def _fd_values(seed: int, m: int = 4, n: int = 3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n), rng.standard_normal((m, n))


def test_forwarddiff_backward_passes_gradcheck(fd_model):
    x, w = _fd_values(0)
    result = bridge.gradcheck(fd_model, [x, w])
    assert result.passed, str(result)
    assert 1.8 < result.slope_first < 2.3, str(result)


def test_forwarddiff_backward_equals_the_analytic_gradient(fd_model):
    x, w = _fd_values(1)
    weights = np.random.default_rng(2).standard_normal(w.shape[0])
    g = bridge.Graph()
    with g.as_default():
        xt, wt = bridge.constant(x, bridge.float64), bridge.constant(w, bridge.float64)
        y = fd_model(xt, wt)
        grad_x, grad_w = bridge.gradients(ops.sum(y * bridge.constant(weights, bridge.float64), 0), [xt, wt])
    with bridge.Session(g) as sess:
        got_y, got_x, got_w = sess.run([y, grad_x, grad_w])
    z, s = w @ x, w @ x**2
    e = np.exp(-0.1 * s)
    np.testing.assert_allclose(got_y, np.sin(z) * e, rtol=1e-14, atol=1e-15)
    # y_i = sin(z_i) e_i:  dy_i/dx_j = e_i w_ij (cos z_i - 0.2 sin z_i x_j),
    #                      dy_i/dw_ij = e_i x_j (cos z_i - 0.1 sin z_i x_j)
    c, sn = (weights * e * np.cos(z))[:, None], (weights * e * np.sin(z))[:, None]
    np.testing.assert_allclose(got_x, (c * w - 0.2 * sn * w * x).sum(0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_w, c * x - 0.1 * sn * x**2, rtol=1e-12, atol=1e-14)


def test_jacobian_through_a_forwarddiff_op_matches_tensorflow_gradients(fd_model):
    """bridge.jacobian of a graph around the op (TF ops before and after it)
    against the same computation written with TF ops, differentiated by TF."""
    m, n = 4, 3
    u0, w0 = _fd_values(3, m, n)
    g = bridge.Graph()
    with g.as_default():
        u = bridge.placeholder(bridge.float64, [n], name="u")
        w = bridge.placeholder(bridge.float64, [m, n], name="w")
        x = ops.tanh(u) * 1.5 + 0.25

        def around(y):
            return y * y + ops.sin(y)

        out_julia = around(fd_model(x, w))
        col = lambda v: ops.reshape(v, [n, 1])  # noqa: E731
        y_tf = ops.reshape(ops.sin(ops.mat_mul(w, col(x))) * ops.exp(-0.1 * ops.mat_mul(w, col(x * x))), [m])
        out_tf = around(y_tf)
        jac_julia = bridge.jacobian(out_julia, [u, w])
        jac_tf = bridge.jacobian(out_tf, [u, w])
    with bridge.Session(g) as sess:
        (ju, jw), (tu, tw), yj, yt = sess.run([jac_julia, jac_tf, out_julia, out_tf], {u: u0, w: w0})
    np.testing.assert_allclose(yj, yt, rtol=1e-13)
    assert ju.shape == (m, n) and jw.shape == (m, m, n)
    np.testing.assert_allclose(ju, tu, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(jw, tw, rtol=1e-11, atol=1e-13)
    assert np.abs(ju).max() > 0.1 and np.abs(jw).max() > 0.1  # not vacuous


SPECIAL_SPEC = """PkgSpecial
double x(n)
@attr double nu = 0.5
double e(n) -> output
double g(n) -> output
double b(n) -> output
"""

SPECIAL_JULIA = r"""
using SpecialFunctions
import ForwardDiff

function pkg_special(e, g, b, x, nu)
    e .= erf.(x)
    g .= gamma.(x)
    b .= besselj.(nu, x)
    return nothing
end

# The derivatives come from ForwardDiff, that is from DiffRules' rules for SpecialFunctions.
derivative(f, x) = map(v -> ForwardDiff.derivative(f, v), x)

function pkg_special_grad(grad_x, grad_e, grad_g, grad_b, e, g, b, x, nu)
    grad_x .+= grad_e .* derivative(erf, x) .+ grad_g .* derivative(gamma, x) .+
               grad_b .* derivative(t -> besselj(nu, t), x)
    return nothing
end
"""

XS = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 4.5])
EULER_GAMMA = 0.57721566490153286061
PSI_HALF = -EULER_GAMMA - 2 * math.log(2)
# digamma at XS, exactly: psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2, psi(x + 1) = psi(x) + 1/x
DIGAMMA = np.array([PSI_HALF, -EULER_GAMMA, PSI_HALF + 2, 1 - EULER_GAMMA, 1.5 - EULER_GAMMA,
                    PSI_HALF + 2 + 2 / 3 + 2 / 5 + 2 / 7])


def _bessel_half(nu: float, x: np.ndarray) -> np.ndarray:
    """J_nu(x) for nu = -1/2, 1/2, 3/2, 5/2 in closed form (spherical Bessel functions)."""
    r = np.sqrt(2 / (np.pi * x))
    forms = {-0.5: np.cos(x), 0.5: np.sin(x), 1.5: np.sin(x) / x - np.cos(x),
             2.5: (3 / x**2 - 1) * np.sin(x) - 3 * np.cos(x) / x}
    return r * forms[nu]


@pytest.fixture(scope="module")
def special(packages, tmp_path_factory):
    folder = op_folder(tmp_path_factory.mktemp("special"), "PkgSpecial", SPECIAL_SPEC, SPECIAL_JULIA)
    return customop.load(folder).pkg_special


def _special_run(op, x: np.ndarray, nu: float):
    """(e, g, b) and the gradient of sum(e), sum(g), sum(b) with respect to x."""
    graph = bridge.Graph()
    with graph.as_default():
        xt = bridge.placeholder(bridge.float64, [len(x)], name="x")
        outs = op(xt, nu=nu)
        grads = [bridge.gradients(ops.sum(o, 0), xt)[0] for o in outs]
    with bridge.Session(graph) as sess:
        return sess.run([list(outs), grads], {xt: x})


@pytest.mark.parametrize("nu", [0.5, 1.5])
def test_special_functions_values_and_derivatives(special, nu):
    (e, g, b), (de, dg, db) = _special_run(special, XS, nu)
    np.testing.assert_allclose(e, [math.erf(v) for v in XS], rtol=1e-14)
    np.testing.assert_allclose(g, [math.gamma(v) for v in XS], rtol=1e-13)
    np.testing.assert_allclose(b, _bessel_half(nu, XS), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(de, 2 / math.sqrt(math.pi) * np.exp(-XS**2), rtol=1e-13)
    np.testing.assert_allclose(dg, g * DIGAMMA, rtol=1e-12, atol=1e-14)
    # J_nu' = (J_{nu-1} - J_{nu+1}) / 2
    np.testing.assert_allclose(db, (_bessel_half(nu - 1, XS) - _bessel_half(nu + 1, XS)) / 2, rtol=1e-11,
                               atol=1e-14)


def test_integer_order_bessel_at_tabulated_values(special):
    x = np.array([1.0, 2.404825557695773])  # the second: J_0's first zero
    (_, _, b0), (_, _, db0) = _special_run(special, x, 0.0)
    (_, _, b1), _ = _special_run(special, x, 1.0)
    np.testing.assert_allclose(b0, [0.7651976865579666, 0.0], atol=1e-15)
    np.testing.assert_allclose(b1, [0.4400505857449335, 0.5191474972894669], rtol=1e-14)
    np.testing.assert_allclose(db0, -b1, rtol=1e-13)  # J_0' = -J_1


def test_special_functions_op_passes_gradcheck(special):
    result = bridge.gradcheck(lambda x: special(x, nu=1.5), XS + 0.1)
    assert result.passed, str(result)
    assert 1.8 < result.slope_first < 2.3, str(result)


# ---------------------------------------------------------------- per-op environments

def _env_folder(parent: Path, name: str, package: str, julia_source: str, manifest: bool = True) -> Path:
    """An op folder (y = f(x)) whose Project.toml lists ``package``, with the
    depot's Manifest.toml (which resolves it and its dependencies)."""
    folder = op_folder(parent, name, f"{name}\ndouble x(n)\ndouble y(n) -> output\n", julia_source)
    (folder / "Project.toml").write_text(f'[deps]\n{package} = "{UUIDS[package]}"\n')
    if manifest:
        shutil.copy(Path(DEPOT) / "environments" / JULIA_VERSION_DIR / "Manifest.toml", folder / "Manifest.toml")
    return folder


def test_op_environments_make_their_packages_loadable_and_stack(packages, tmp_path):
    """A fresh Julia that has the depot only as a depot, the Julia way, and not
    its environment: SpecialFunctions and StaticArrays are unknown to it until
    the op folders listing them load; both ops then keep working, and the
    user's load path is kept."""
    if not DEPOT:
        pytest.skip("the op folders take their Manifest.toml from the depot named by TFBRIDGE_JULIA_DEPOT: "
                    + HOW_TO_GET)
    erf_op = _env_folder(tmp_path, "PkgEnvErf", "SpecialFunctions",
                         "using SpecialFunctions\npkg_env_erf(y, x) = (y .= erf.(x); nothing)\n")
    static_op = _env_folder(tmp_path, "PkgEnvStatic", "StaticArrays",
                            "using StaticArrays\n"
                            "pkg_env_static(y, x) = (y .= x .+ sum(SVector(1.0, 2.0, 3.0)); nothing)\n")
    first_depot = os.environ.get("JULIA_DEPOT_PATH", "").split(":")[0] or str(Path.home() / ".julia")
    code = f"""
        import json, math
        import numpy as np
        import bridge
        from bridge import customop, julia

        def run(op, x):
            g = bridge.Graph()
            with g.as_default():
                xt = bridge.placeholder(bridge.float64, [len(x)], name="x")
                y = op(xt)
            with bridge.Session(g) as sess:
                return sess.run(y, {{xt: np.asarray(x)}}).tolist()

        julia.init()
        path = lambda: julia.eval('join(Base.LOAD_PATH, "|")').split("|")
        before = path()
        unknown = julia.eval('Base.identify_package("SpecialFunctions") === nothing && '
                             'Base.identify_package("StaticArrays") === nothing')
        erf = customop.load({str(erf_op)!r}).pkg_env_erf
        first = run(erf, [0.5, 1.0])
        after_erf = path()
        static = customop.load({str(static_op)!r}).pkg_env_static
        print(json.dumps({{"unknown": unknown, "before": before, "after_erf": after_erf, "after": path(),
                          "erf": first, "static": run(static, [1.0, 2.0]), "erf_again": run(erf, [2.0])}}))
    """
    # The user's default environment stays off the load path: what it lists must not help.
    got = _last_json(_child(code, tmp_path, JULIA_DEPOT_PATH=f"{first_depot}:{DEPOT}",
                            JULIA_LOAD_PATH="@:@stdlib"))
    assert got["unknown"], "the packages were loadable without the op environments: the test proves nothing"
    assert got["after_erf"] == got["before"] + [str(erf_op)]
    assert got["after"] == got["before"] + [str(erf_op), str(static_op)]
    np.testing.assert_allclose(got["erf"], [math.erf(0.5), math.erf(1.0)], rtol=1e-14)
    assert got["static"] == [7.0, 8.0]
    np.testing.assert_allclose(got["erf_again"], [math.erf(2.0)], rtol=1e-14)


def test_a_package_found_nowhere_is_refused_before_the_file_runs(tmp_path):
    julia.init()
    load_path = julia.eval('join(Base.LOAD_PATH, "\\n")')
    folder = op_folder(tmp_path, "PkgMissing", "PkgMissing\ndouble x(n)\ndouble y(n) -> output\n",
                       "pkg_missing_ran() = true\nusing LinearAlgebra, NoSuchPackageTfjl\n"
                       "pkg_missing(y, x) = (y .= x; nothing)\n")
    (folder / "Project.toml").write_text("[deps]\n")
    with pytest.raises(customop.JuliaPackageError) as info:
        customop.load(folder)
    message = str(info.value)
    assert "NoSuchPackageTfjl" in message and "LinearAlgebra" not in message.split("\n")[0], message
    assert str(folder) in message and "PkgMissing" in message and "pkg_missing.jl" in message
    assert f"julia --project={folder} -e 'using Pkg; Pkg.add(\"NoSuchPackageTfjl\")'" in message
    assert "TFBRIDGE_JULIA_DEPOT" in message
    assert info.value.packages == ["NoSuchPackageTfjl"] and info.value.directory == folder
    # Refused before any of the file ran, and the op folder's environment is off the load path again.
    assert julia.eval("isdefined(Main, :pkg_missing_ran)") is False
    assert julia.eval('join(Base.LOAD_PATH, "\\n")') == load_path


def test_a_listed_but_uninstalled_package_is_refused_saying_so(tmp_path):
    folder = op_folder(tmp_path, "PkgUninstalled", "PkgUninstalled\ndouble x(n)\ndouble y(n) -> output\n",
                       "using Example\npkg_uninstalled(y, x) = (y .= x; nothing)\n")
    # Example's real UUID (Julia's registry); no depot here holds it.
    (folder / "Project.toml").write_text('[deps]\nExample = "7876af07-990d-54b4-ab0e-23690620f79a"\n')
    with pytest.raises(customop.JuliaPackageError) as info:
        customop.load(folder)
    assert ("Example: an environment lists it (7876af07-990d-54b4-ab0e-23690620f79a), but no Manifest.toml on "
            "the load path resolves it to a copy in a depot") in str(info.value)
    assert f"julia --project={folder} -e 'using Pkg; Pkg.add(\"Example\")'" in str(info.value)


def test_a_conditional_import_that_fails_is_explained_too(tmp_path):
    """An import the look-up does not see (under `if`) fails in Julia itself: the same error."""
    folder = op_folder(tmp_path, "PkgLateMissing", "PkgLateMissing\ndouble x(n)\ndouble y(n) -> output\n",
                       "pkg_late_missing(y, x) = (y .= x; nothing)\nif true\n    using NoSuchLatePackageTfjl\nend\n")
    with pytest.raises(customop.JuliaPackageError) as info:
        customop.load(folder)
    message = str(info.value)
    assert "NoSuchLatePackageTfjl" in message and str(folder) in message
    assert "Julia says: " in message and "Pkg.add(\"NoSuchLatePackageTfjl\")" in message
    assert isinstance(info.value.__cause__, julia.JuliaError)


def test_the_packages_variable_names_agree():
    from bridge.customop import environment
    assert environment.EXTRA_DEPOT_VARIABLE == julia.EXTRA_DEPOT_VARIABLE == "TFBRIDGE_JULIA_DEPOT"


# ---------------------------------------------------------------- the scaffold

def test_cli_scaffold_with_packages_builds_and_runs(packages, tmp_path):
    folder = tmp_path / "pkg_scaffold"
    proc = tfbridge("customop", "init", "PkgScaffold", str(folder), "--with-package", "SpecialFunctions",
                    "--with-package", "StaticArrays", cwd=tmp_path, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"wrote {folder / 'Project.toml'}" in proc.stdout
    project = (folder / "Project.toml").read_text()
    for name in ("SpecialFunctions", "StaticArrays"):
        assert f'{name} = "{UUIDS[name]}"' in project, project
    source = (folder / "pkg_scaffold.jl").read_text()
    assert "\nusing SpecialFunctions, StaticArrays" in source, source
    # The scaffold as written loads and runs (y = 2x) ...
    op = customop.load(folder).pkg_scaffold
    graph = bridge.Graph()
    with graph.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        y = op(x)
    with bridge.Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: np.array([1.0, 2.5])}), [2.0, 5.0])
    # ... with its environment on the load path, before the extra depot's, and its packages usable.
    load_path = julia.eval('join(Base.LOAD_PATH, "\\n")').split("\n")
    assert str(folder) in load_path
    if DEPOT:
        assert load_path.index(str(folder)) < load_path.index(
            str(Path(DEPOT) / "environments" / JULIA_VERSION_DIR))
    assert julia.eval("SpecialFunctions.erf(0.5)") == pytest.approx(math.erf(0.5), rel=1e-15)


def test_scaffold_takes_uuids_from_registries_installed_packages_and_the_stdlib(tmp_path):
    """A fresh Julia with no environment listing the packages: a registry's
    package (not installed), an installed copy in a depot (the shared one, as a
    plain depot), the standard library; one warning names those that cannot
    load yet and says how to fix that."""
    registry = tmp_path / "registry-depot" / "registries" / "Local"
    registry.mkdir(parents=True)
    (registry / "Registry.toml").write_text(
        'name = "Local"\nuuid = "11111111-2222-3333-4444-555555555555"\n\n[packages]\n'
        '0a9bc3c1-7a2d-4d65-9c3e-6b1a1f0e9d11 = { name = "RegOnlyPkgTfjl", path = "R/RegOnlyPkgTfjl" }\n')
    depots = [str(tmp_path / "mine"), str(tmp_path / "registry-depot")] + ([DEPOT] if DEPOT else [])
    wanted = ["RegOnlyPkgTfjl", "LinearAlgebra"] + (["SpecialFunctions"] if DEPOT else [])
    code = f"""
        import json, warnings
        from bridge import customop
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            customop.init("PkgRegScaffold", "op", packages={wanted!r})
        print(json.dumps({{"project": open("op/Project.toml").read(), "notes": [str(n.message) for n in notes]}}))
    """
    got = _last_json(_child(code, tmp_path, JULIA_DEPOT_PATH=":".join(depots), JULIA_LOAD_PATH="@:@stdlib"))
    assert 'RegOnlyPkgTfjl = "0a9bc3c1-7a2d-4d65-9c3e-6b1a1f0e9d11"' in got["project"], got["project"]
    assert 'LinearAlgebra = "37e2e46d-f89d-539d-b4ee-838fcccc9c8e"' in got["project"], got["project"]
    if DEPOT:
        assert f'SpecialFunctions = "{UUIDS["SpecialFunctions"]}"' in got["project"], got["project"]
    # The registry's package is not installed; SpecialFunctions is, but no manifest on this load path
    # resolves it: neither loads as things stand, and one warning says so.
    note, = got["notes"]
    unloadable = "RegOnlyPkgTfjl, SpecialFunctions" if DEPOT else "RegOnlyPkgTfjl"
    assert note.startswith(f"Julia knows {unloadable} but cannot load"), note
    assert f"julia --project={tmp_path / 'op'} -e 'using Pkg; Pkg.instantiate()'" in note


def test_cli_scaffold_of_an_unknown_package_says_how_to_fix_and_writes_nothing(tmp_path):
    folder = tmp_path / "pkg_unknown"
    proc = tfbridge("customop", "init", "PkgUnknown", str(folder), "--with-package", "NoSuchPackageTfjl",
                cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Julia knows no package named NoSuchPackageTfjl" in proc.stderr
    assert "Pkg.add(\"NoSuchPackageTfjl\")" in proc.stderr and "TFBRIDGE_JULIA_DEPOT" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not folder.exists()


def test_cli_scaffold_refuses_a_name_that_is_no_package(tmp_path):
    proc = tfbridge("customop", "init", "PkgBadName", str(tmp_path / "x"), "--with-package", "Special.jl",
                cwd=tmp_path)
    assert proc.returncode == 1 and "'Special.jl' is not a Julia package name" in proc.stderr, proc.stderr
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------- the depot mirror (julia/mirror_julia_depot.py)

def test_mirror_depot_restores_links_that_arrived_as_text_files(tmp_path):
    source = tmp_path / "depot"
    jll = source / "packages" / "Foo_jll" / "AbCdE"
    (jll / "src").mkdir(parents=True)
    (jll / "src" / "Foo_jll.jl").write_text("module Foo_jll end\n")
    (jll / "override").write_text("../../../overrides/Foo")       # a flattened link to a folder
    lib = source / "overrides" / "Foo" / "lib"
    lib.mkdir(parents=True)
    (lib / "libfoo.so.1.2").write_bytes(b"\x7fELF\0binary")
    (lib / "libfoo.so.1").write_text("libfoo.so.1.2")               # a flattened link to a file
    (lib / "libsys.so").write_text(sys.executable)                 # an absolute one
    plain = source / "packages" / "Bar" / "XyZ"
    plain.mkdir(parents=True)
    (plain / "Bar.jl").write_text("module Bar end")                # no newline, names no file: content
    (plain / "empty.toml").write_text("")
    (plain / "note.txt").write_text("../Bar\n")                     # has a line ending: content
    dest = tmp_path / "mirror"
    proc = subprocess.run([sys.executable, str(REPO / "julia" / "mirror_julia_depot.py"), str(source), str(dest)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "3 symbolic links restored" in proc.stdout
    mjll = dest / "packages" / "Foo_jll" / "AbCdE"
    assert os.readlink(mjll / "override") == "../../../overrides/Foo" and (mjll / "override").is_dir()
    assert (mjll / "override" / "lib" / "libfoo.so.1").read_bytes() == b"\x7fELF\0binary"
    assert os.readlink(dest / "overrides" / "Foo" / "lib" / "libsys.so") == sys.executable
    # The JLL's own files are copies (stale precompiled files made from the broken copy then
    # no longer match them); everything else links to the source.
    assert not (mjll / "src" / "Foo_jll.jl").is_symlink()
    assert (mjll / "src" / "Foo_jll.jl").read_text() == "module Foo_jll end\n"
    for name in ("Bar.jl", "empty.toml", "note.txt"):
        assert os.readlink(dest / "packages" / "Bar" / "XyZ" / name) == str(plain / name)
    assert (dest / ".mirror-of").read_text().strip() == str(source)
