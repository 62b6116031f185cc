"""The documentation stays true to the repository.

- Every code block of README.md and of the site's pages (docs/) is run by a
  test, which finds it by its page and a string only it holds, or is listed
  with the reason it cannot run (a cluster of machines, a package registry,
  a fragment); a new block fails here until it is one or the other.
- Every repository path the docs, CONTRIBUTING.md and the comments and
  docstrings of the code name exists (`tests/foo/test_bar.py`,
  `bridge/x.py`, `kernels_cpp/...`), every bare `NAME.md` is a file of the
  repository, and every section a path or README.md is cited with
  (`docs/internals/kernels-cpp.md, "Threads"`) is a heading of that page.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from support import REPO
from support.docs import blocks, pages

# --- code blocks ------------------------------------------------------------------

SETUP = "the set-up itself: .ci/run runs `make docs` and `make test` in a fresh clone"
# (page, language, a string only that block holds) -> the test file that runs it, or why nothing can.
RUN = "run by"
NOT_RUN = "not run"
BLOCKS = {
    ("README.md", "python", "bridge.gradcheck(sinc"): (RUN, "tests/project/test_readme.py"),
    ("README.md", "sh", "make demo"): (NOT_RUN, SETUP),
    ("docs/getting-started/install.md", "sh", "make demo"): (NOT_RUN, SETUP),
    ("docs/getting-started/first-op.md", "sh", "customop init Sinc"): (RUN, "tests/project/test_readme.py"),
    ("docs/getting-started/first-op.md", "", "Sinc\n"): (RUN, "tests/project/test_readme.py"),
    ("docs/getting-started/first-op.md", "julia", "sinc(y, x) = (y .= sin.(x) ./ x; nothing)"):
        (RUN, "tests/project/test_readme.py"),
    ("docs/getting-started/first-op.md", "julia", "sinc_grad"): (RUN, "tests/project/test_readme.py"),
    ("docs/getting-started/first-op.md", "python", "customop.load"): (RUN, "tests/project/test_readme.py"),
    ("docs/getting-started/first-op.md", "sh", "tfbridge gradtest ops/sinc"): (RUN, "tests/project/test_readme.py"),
    ("docs/getting-started/first-op.md", "python", "bridge.julia.eval("): (RUN, "tests/project/test_readme.py"),
    ("docs/guides/julia-ops.md", "python", "bridge.gradcheck(ops.softplus, x0)"):
        (RUN, "tests/project/test_readme.py"),
    ("docs/guides/julia-ops.md", "", "op FdProbe: ops/fd_probe/custom_op.txt:5"):
        (NOT_RUN, "an error message, which tests/customop/test_forwarddiff.py checks word for word "
                  "(test_a_float64_buffer_is_refused_at_load)"),
    ("docs/guides/julia-packages.md", "sh", "--with-package SpecialFunctions"):
        (NOT_RUN, "Pkg.instantiate and Pkg.add need Julia's package registry, which tests cannot reach; "
                  "tests/julia/test_packages.py runs `init --with-package` against the depot"),
    ("docs/guides/julia-packages.md", "", "Smooth\n"): (RUN, "tests/julia/test_packages.py"),
    ("docs/guides/julia-packages.md", "julia", "smooth_grad"): (RUN, "tests/julia/test_packages.py"),
    ("docs/guides/fortran-ops.md", "sh", "customop init Scale ops/scale --fortran"):
        (RUN, "tests/project/test_readme.py"),
    ("docs/guides/fortran-ops.md", "", "Scale\n"): (RUN, "tests/customop/test_fortran_ops.py"),
    ("docs/guides/fortran-ops.md", "fortran", "subroutine scale("): (RUN, "tests/customop/test_fortran_ops.py"),
    ("docs/guides/fortran-ops.md", "", "Positives\n"): (RUN, "tests/customop/test_fortran_dynamic.py"),
    ("docs/guides/fortran-ops.md", "fortran", "positives_size"): (RUN, "tests/customop/test_fortran_dynamic.py"),
    ("docs/guides/predefined-graphs.md", "python", "import_graph_def"): (RUN, "tests/project/test_readme.py"),
    ("docs/guides/graphs-and-gradients.md", "python", "grads = bridge.gradients"):
        (RUN, "tests/project/test_readme.py"),
    ("docs/guides/training.md", "python", "ScipyOptimizer"): (RUN, "tests/project/test_readme.py"),
    ("docs/guides/tensorboard.md", "sh", "tensorboard --logdir"):
        (NOT_RUN, "a server left running; tests/examples/test_inverse_diffusion.py runs the example and "
                  "tests/summary/test_tensorboard.py serves a bridge-written logdir with the real tensorboard"),
    ("docs/guides/tensorboard.md", "python", "summary.FileWriter("): (RUN, "tests/project/test_readme.py"),
    ("docs/guides/distributed.md", "sh", "openssl req"):
        (NOT_RUN, "three machines n1, n2, n3; tests/distribute/test_tunnels.py runs the recipe on loopback"),
    ("docs/guides/distributed.md", "sh", "cat > cluster.json"):
        (NOT_RUN, "fixed ports 2222-2224 and servers left running; tests/distribute/test_runs.py starts "
                  "`tfbridge server` tasks the same way on free ports"),
    ("docs/guides/distributed.md", "sh", "srun --ntasks=4"): (NOT_RUN, "SLURM, Open MPI and TF_CONFIG launchers"),
    ("docs/guides/distributed.md", "python", 'customop.declare("ops/sinc")'):
        (NOT_RUN, "needs cluster.json's servers with Julia workers; tests/distribute/test_julia_ops.py "
                  "runs declared Julia ops on workers"),
    ("docs/guides/distributed.md", "python", "distribute.replicate("):
        (NOT_RUN, "needs cluster.json's servers; tests/distribute/test_train.py trains with `replicate` "
                  "and tests/distribute/test_faults.py with `checkpoint_dir` on local clusters"),
    ("docs/guides/distributed.md", "python", "model_loss(x, w.value())"):
        (NOT_RUN, "a fragment (`model_loss` is the reader's); tests/distribute/test_stock_tf.py builds the "
                  "whole pattern (tests/support/sync_mlp.py)"),
    ("docs/guides/distributed.md", "sh", "#SBATCH"): (NOT_RUN, "a SLURM batch script"),
    ("docs/guides/distributed.md", "sh", "mpirun -np 3 --host"): (NOT_RUN, "Open MPI on three hosts"),
    ("docs/guides/fortran.md", "fortran", "program predict"): (RUN, "tests/fortran/test_inference.py"),
    ("docs/guides/fortran.md", "", "-o predict && ./predict path/to/saved_model"):
        (NOT_RUN, "the shell line around the program above: tests/fortran/test_inference.py compiles it "
                  "with the same flags (compile_program in tests/support/fortran.py)"),
    ("docs/guides/fortran.md", "cmake", "find_package(tf_bridge"):
        (NOT_RUN, "tests/project/test_packaging_fortran.py builds the same kind of project, "
                  "examples/fortran_surrogate/CMakeLists.txt, against a fresh `pip install`"),
    ("docs/guides/fortran.md", "", "cmake -S . -B build -Dtf_bridge_DIR"):
        (NOT_RUN, "the shell lines around the CMake project above: tests/project/test_packaging_fortran.py "
                  "configures with the package config and compiles with pkg-config's flags from a fresh "
                  "`pip install`"),
    ("docs/guides/fortran.md", "fortran", "program online_training"): (RUN, "tests/fortran/test_trainer.py"),
    ("docs/internals/interrupts.md", "julia", "function my_solver!"): (RUN, "tests/project/test_readme.py"),
    ("docs/internals/kernels-cpp.md", "", "include/tfjl/"): (NOT_RUN, "a listing of files"),
    ("docs/internals/kernels-cpp.md", "", "Python threads"): (NOT_RUN, "a diagram of the threads"),
    ("docs/internals/kernels-cpp.md", "", "TF step cancelled"): (NOT_RUN, "a diagram of the threads"),
    ("docs/internals/kernels-cpp.md", "", "Julia is not available: this process"):
        (NOT_RUN, "an error message, which tests/julia/test_fork.py checks"),
    ("docs/internals/kernels-cpp.md", "", "cmake -S kernels_cpp -B build"):
        (NOT_RUN, "the runtime's build, which bridge/julia/runtime.py runs at every test session's first Julia op"),
    ("docs/internals/kernels-cpp.md", "", "fortran/\n"): (NOT_RUN, "a listing of files"),
    ("kernels_cpp/include/tfjl/CONTRACT.md", "cpp", "tfjl/contract.h (generated"):
        (NOT_RUN, "declarations quoted from the headers"),
    ("kernels_cpp/include/tfjl/CONTRACT.md", "cpp", "`name`: the argument's name"):
        (NOT_RUN, "declarations quoted from the headers"),
    ("kernels_cpp/include/tfjl/CONTRACT.md", "cpp", "tfjl::InputArg("): (NOT_RUN, "declarations quoted from the headers"),
    ("kernels_cpp/include/tfjl/CONTRACT.md", "c", "int  tfjl_init("): (NOT_RUN, "declarations quoted from the headers"),
}


def _all_blocks() -> list[tuple[str, str, str]]:
    return [(page, lang, code) for page in pages() for lang, code in blocks(page)]


def test_every_block_is_run_or_says_why_not():
    unclaimed = []
    for page, lang, code in _all_blocks():
        keys = [k for k in BLOCKS if k[0] == page and k[1] == lang and k[2] in code]
        if len(keys) != 1:
            first = code.splitlines()[0] if code else ""
            unclaimed.append(f"{page}: ```{lang} block starting {first[:60]!r} matches {len(keys)} entries")
    assert unclaimed == [], "a block needs one entry in BLOCKS (run by a test, or why not):\n" + "\n".join(unclaimed)


@pytest.mark.parametrize("key", list(BLOCKS), ids=[f"{k[0]}:{k[2][:30]}" for k in BLOCKS])
def test_each_entry_names_one_block_and_the_test_that_runs_it(key):
    page, lang, marker = key
    found = [code for kind, code in blocks(page) if kind == lang and marker in code]
    assert len(found) == 1, f"{page} has {len(found)} {lang or 'plain'} blocks holding {marker!r}"
    kind, what = BLOCKS[key]
    if kind == RUN:  # the test file finds the block by the same page and string
        source = (REPO / what).read_text()
        assert page in source, f"{what} does not read {page}"
        assert marker.replace("\n", "\\n") in source, f"{what} does not look for {marker!r}"
    else:
        assert kind == NOT_RUN and what.strip(), "say why the block cannot run"


def test_the_readmes_example_is_run():
    assert BLOCKS[("README.md", "python", "bridge.gradcheck(sinc")][0] == RUN


# --- paths, files and sections named ---------------------------------------------------

TOP = ("bridge", "kernels_cpp", "julia", "templates", "tests", "bench", "examples", "docs")
# A repository path: one of the top folders, then a path; not a part of a longer path or a name.
# Patterns (bench/bench_*.py, <op folder>/build/<key>) are matched whole, then left out.
_PATH = re.compile(r"(?<![\w./~$-])((?:%s)/[\w./*<>{}-]*[\w/*>}])" % "|".join(TOP))
# A bare Markdown file name, such as README.md or CONTRACT.md.
_MD = re.compile(r"(?<![\w./-])([A-Za-z][\w-]*\.md)\b")
# A page named with the sections cited from it: docs/x.md, "A", "B" and "C"
# (not a file name in a string literal: "docs/x.md", "python")
_CITED = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.md|README)(?![\w\"])[`)]*,?[ \t]*(?:\n[ \t]*(?:#|//|!|\*)?[ \t]*)?"
                    r"((?:[,;]?[ \t]*(?:\n[ \t]*(?:#|//|!|\*)?[ \t]*)?(?:and[ \t]+)?\"[^\"\n]{2,80}\")+)")

SCANNED_TEXT = ["README.md", "CONTRIBUTING.md", "Makefile"]
SCANNED_CODE = ["bridge", "kernels_cpp", "julia", "templates", "tests", "examples", "bench"]
CODE_SUFFIXES = {".py", ".jl", ".h", ".cc", ".c", ".j2", ".f90", ".inc", ".sh", ".txt", ".toml", ".in", ".md"}
# Paths that are made at run time or by a build, not files of the repository (the outputs of
# the examples are too, which .gitignore lists), and made-up ones that illustrate a rule.
GENERATED = ("bridge/_resources",)
ILLUSTRATIONS = {"bridge/a/__init__.py", "bridge/a/__init__", "bridge/low/__init__.py"}


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return out.split()


def _scanned_files() -> list[str]:
    files = [f for f in _tracked() if f.startswith("docs/") and f.endswith(".md")] + SCANNED_TEXT
    files += [f for f in _tracked() if f.split("/", 1)[0] in SCANNED_CODE and Path(f).suffix in CODE_SUFFIXES
              and "/golden/" not in f and f != "tests/project/test_docs.py"]  # this file's made-up examples
    return [f for f in files if (REPO / f).is_file()]


def _headings(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.S | re.M)
    for include in re.findall(r'^--8<-- "([^"]+)"$', text, re.M):  # a page that includes another file
        text += (REPO / include).read_text()
    # headings, and the bold labels that open the items of a list (kernels-cpp.md's "**Waiting for work.**")
    titles = re.findall(r"^#{1,6} (.+)$", text, re.M) + re.findall(r"^[*-] \*\*(.+?)\.?\*\*", text, re.M)
    return {re.sub(r"\s+", " ", h.replace("`", "")).strip() for h in titles}


def _names_a_heading(headings: set[str], cited: str) -> bool:
    cited = re.sub(r"\s+", " ", cited).strip()
    return any(h == cited or h.startswith((cited + ":", cited + " (", cited + ",")) for h in headings)


def _problems(rel: str, text: str | None = None) -> list[str]:
    """What rel (its text, or the text given) names that does not exist."""
    if text is None:
        text = (REPO / rel).read_text(errors="replace")
    tracked = _TRACKED_NAMES()
    here = (REPO / rel).parent
    problems = []
    missing = []
    for path in sorted(set(_PATH.findall(text))):
        path = path.rstrip(".")
        if any(c in path for c in "<>*{}") or path.startswith(GENERATED) or path in ILLUSTRATIONS:
            continue
        # from the repository's root, or relative to the file's folder or one above it
        # (kernels_cpp/fortran/templates/*.j2 name the templates as generate.py does, templates/x.j2)
        if not any((folder / path).exists() for folder in [here, *here.parents] if REPO in [folder, *folder.parents]):
            missing.append(path)
    ignored = _ignored(missing)
    problems += [f"{rel}: names {path}, which does not exist" for path in missing if path not in ignored]
    for name in sorted(set(_MD.findall(text))):
        if name not in tracked:
            problems.append(f"{rel}: names {name}, which is no file of the repository")
    for page, cited in _CITED.findall(text):
        target = REPO / "README.md" if page in ("README", "README.md") else REPO / page
        if not target.is_file():
            target = here / page
        if not target.is_file() or target.suffix != ".md":
            continue  # a bare name (CONTRACT.md): the check above found it
        headings = _headings(target)
        for section in re.findall(r"\"([^\"\n]+)\"", cited):
            if not _names_a_heading(headings, section):
                problems.append(f"{rel}: cites {page}, \"{section}\", which has no such heading")
    return problems


def _ignored(paths: list[str]) -> set[str]:
    """The paths .gitignore covers: what a build or an example writes (examples/*/runs, ...)."""
    if not paths:
        return set()
    asked = paths + [p + "/" for p in paths]  # a folder pattern (examples/*/runs/) matches only with the slash
    proc = subprocess.run(["git", "check-ignore", "--no-index", *asked], cwd=REPO, capture_output=True, text=True)
    return {p.rstrip("/") for p in proc.stdout.split()}


_cache: dict[str, set[str]] = {}


def _TRACKED_NAMES() -> set[str]:
    if "names" not in _cache:
        _cache["names"] = {Path(f).name for f in _tracked()}
    return _cache["names"]


def test_every_path_and_section_the_docs_and_comments_name_exists():
    problems = [p for rel in _scanned_files() for p in _problems(rel)]
    assert problems == [], f"{len(problems)} names of things that do not exist:\n" + "\n".join(problems)


@pytest.mark.parametrize("text, wanted", [
    ("see tests/test_math_ops.py for more", ["names tests/test_math_ops.py"]),
    ("measured (ENVIRONMENT.md, \"the LLVM clash\")", ["names ENVIRONMENT.md"]),
    ("# (docs/internals/kernels-cpp.md, \"Threads\")", []),
    ("# (docs/internals/kernels-cpp.md, \"Threadz\")", ['cites docs/internals/kernels-cpp.md, "Threadz"']),
    ("README, \"Julia's start\"", ['cites README, "Julia\'s start"']),
    ("# docs/guides/distributed.md, \"Security\" and\n# \"Recovery\"", []),
    ("bridge/_resources/fortran and bridge/julia/host.py", []),
    ("kernels_cpp/README.md says more", []),
    ("every bench/bench_*.py; <op folder>/build/<key>/", []),
    ('block("docs/guides/training.md", "python", "x")', []),
    ("examples/inverse_diffusion/runs (what the example writes)", []),
])
def test_the_name_check_finds_what_it_should(text, wanted):
    """The check itself, on made-up text: a stale path, a file outside the repository and a section that is
    not there are found; real ones pass."""
    problems = _problems("tests/project/made_up.md", text)
    assert len(problems) == len(wanted) and all(w in p for w, p in zip(wanted, problems, strict=True)), problems
