"""The ``tfbridge`` command.

    tfbridge customop init NAME [DIR] [--with-package PKG]... [--fortran]
                                        scaffold an op: custom_op.txt + a working Julia example
                                        (+ Project.toml listing the Julia packages it uses)
    tfbridge customop build DIR... [--image]
                                        generate and compile lib<Op>.so (cached); several folders
                                        are built in parallel, one line per op; --image then builds
                                        Julia's system image for these ops (as julia build-image --ops)
    tfbridge customop stub DIR          print Julia (or Fortran) skeletons for the spec's functions
    tfbridge gradtest DIR [--order 2] [--plot PATH] [--input NAME=VALUE]... [--inputs FILE]
                                        gradient test of the op (bridge.customop.gradtest)
    tfbridge server --cluster FILE --job NAME --task I [--ops DIR]... [--host ADDR]
                                        serve one task of a TensorFlow cluster until SIGTERM/SIGINT
    tfbridge julia build-image [--ops DIR...]
                                        build Julia's system image with TFBridge in it (cached;
                                        minutes): Julia then starts in a fraction of a second;
                                        with --ops, one that also holds those ops' Julia packages
                                        and compiled code, used by processes loading them

Errors in the spec or the build print one message (file:line: what was
expected, or the compiler's errors) and exit 1, without a traceback;
gradtest exits 0 on PASS (or LINEAR; QUADRATIC with --order 2), 1 on FAIL and 2 when the test
cannot run or cannot tell (CANNOT TEST, CONSTANT).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence


def _customop_init(args: argparse.Namespace) -> int:
    from bridge import customop

    directory = Path(args.dir) if args.dir else Path(customop.spec.snake_case(args.name))
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            written = customop.init(args.name, directory, packages=args.packages, fortran_op=args.fortran)
    except (customop.JuliaPackageError, ValueError) as exc:
        print(f"tfbridge: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    for note in notes:
        print(f"tfbridge: note: {note.message}", file=sys.stderr)
    print(f"next: edit them, then run 'tfbridge customop build {directory}'")
    return 0


@contextlib.contextmanager
def _notes_from_warnings(categories: tuple) -> Iterator[None]:
    """Print warnings of ``categories`` as ``tfbridge: note: ...`` lines: a command has no
    caller's line for them to point at (the library points them at the user's call)."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, categories):
            print(f"tfbridge: note: {message}", file=sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def _customop_build(args: argparse.Namespace) -> int:
    from bridge import customop

    if len(args.dirs) == 1:
        print(customop.build(args.dirs[0]))
    elif _build_in_parallel(args.dirs, args.jobs):
        return 1
    return _build_op_image(args.dirs) if args.image else 0


def _build_op_image(dirs: Sequence[str]) -> int:
    from bridge.customop import image
    from bridge.julia import buildtools, runtime, sysimage

    try:
        image.build_image(dirs)
    except (sysimage.ImageBuildError, runtime.CacheNotWritableError, buildtools.ToolNotFoundError) as exc:
        print(f"tfbridge: {exc}", file=sys.stderr)
        return 1
    return 0


def _build_in_parallel(dirs: Sequence[str], jobs: Optional[int]) -> int:
    """Build independent op folders at once (each is one compile), printing
    one line per op as it is done; 1 if any failed (each failure says why)."""
    import os
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from bridge import customop

    jobs = jobs or min(len(dirs), os.cpu_count() or 1)
    printing = threading.Lock()

    def say(line: str, stream=sys.stdout) -> None:
        with printing:
            print(line, file=stream, flush=True)

    def one(directory: str) -> bool:
        started = time.monotonic()
        steps: list[str] = []

        def progress(message: str) -> None:
            steps.append(message)
            if "precompiled header" in message:  # shared by all the ops: said once, as it happens
                say(f"tfbridge: {message}", sys.stderr)
        try:
            library = customop.build(directory, progress=progress)
        except (customop.SpecError, customop.BuildError, FileNotFoundError, OSError) as exc:
            say(f"{directory}: failed after {time.monotonic() - started:.1f} s: {exc}", sys.stderr)
            return False
        how = "built" if any(": done in " in step for step in steps) else "cached"
        say(f"{directory}: {how} in {time.monotonic() - started:.1f} s -> {library}")
        return True

    started = time.monotonic()
    say(f"tfbridge: building {len(dirs)} op folders, {jobs} at a time", sys.stderr)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, dirs))
    say(f"tfbridge: {sum(results)} of {len(dirs)} built or cached in {time.monotonic() - started:.1f} s",
        sys.stderr)
    return 0 if all(results) else 1


def _customop_stub(args: argparse.Namespace) -> int:
    from bridge.customop import language

    spec, op_language = language.read(Path(args.dir))
    sys.stdout.write(op_language.stub(spec))  # Julia functions, or Fortran subroutines (checked first)
    return 0


#: Functions adding further `tfbridge customop` actions: each takes the
#: subparsers object, adds its parser and sets ``run`` (args -> exit code).
def _gradtest(args: argparse.Namespace) -> int:
    """Build the op if needed and run its generated gradtest.py (the
    convergence test of its gradient); exit status 1 on FAIL, 2 when the
    test cannot run (an op without a gradient among the reasons)."""
    import subprocess

    from bridge.customop import SPEC_FILE, build, parse_file
    from bridge.customop.gradtest import no_gradient_reason
    from bridge.customop.spec import has_gradient

    spec = parse_file(Path(args.dir) / SPEC_FILE)
    if not has_gradient(spec):  # the test cannot run: exit 2, as for any other reason
        print(f"tfbridge: {no_gradient_reason(spec)}", file=sys.stderr)
        return 2
    script = build(args.dir).parent / "gradtest.py"
    plot = args.plot if args.plot is not None else str(Path(args.dir) / "gradcheck.png")
    given = ([] if args.inputs is None else ["--inputs", args.inputs]) + [f"--input={v}" for v in args.input]
    # The script of DIR's own build: it tests the folder it sits in (a copy's build tests the copy).
    return subprocess.call([sys.executable, str(script), "--plot", plot, "--order", str(args.order), *given])


def _julia_build_image(args: argparse.Namespace) -> int:
    from bridge.julia import buildtools, runtime, sysimage

    if args.ops:
        return _build_op_image(args.ops)

    try:
        sysimage.build_image()
    except (sysimage.ImageBuildError, runtime.CacheNotWritableError, buildtools.ToolNotFoundError) as exc:
        print(f"tfbridge: {exc}", file=sys.stderr)
        return 1
    return 0


CUSTOMOP_ACTIONS: list[Callable[[argparse._SubParsersAction], None]] = []


def _server_cluster(args: argparse.Namespace):
    """(ClusterSpec, job, task) from --cluster (a JSON file, TF_CONFIG or SLURM) and --job/--task,
    every value checked (a ClusterSpecError names the one that is wrong)."""
    from bridge.distribute import checks
    from bridge.distribute import cluster as clusters

    source = args.cluster
    job = args.job
    task = None if args.task is None else checks.task_index(args.task, "--task")
    if args.host is not None:
        problem = checks.host_problem(args.host, bare_ipv6=True)
        if problem:
            raise clusters.ClusterSpecError(f"--host {checks.show(args.host)}: {problem} (a host name or IP "
                                            "address, without a port; 0.0.0.0 listens on every interface)")
    if source == "TF_CONFIG":
        spec = clusters.ClusterSpec.from_tf_config()
        if job is None or task is None:
            tf_job, tf_task = clusters.tf_config_task()
            job, task = job if job is not None else tf_job, task if task is not None else tf_task
    elif source == "SLURM":
        jobs = None
        if args.slurm_jobs:
            jobs = {}
            for part in args.slurm_jobs.split(","):
                name, _, count = part.partition("=")
                checks.check_job_name(name, f"--slurm-jobs {checks.show(args.slurm_jobs)}")
                jobs[name] = checks.ascii_int(count, f"--slurm-jobs: the count of '{name}'", -1, checks.MAX_TASKS)
        port_base = checks.ascii_int(args.port_base, "--port-base", 1, 65535)
        spec = clusters.ClusterSpec.from_slurm(jobs, port_base=port_base)
        if job is None or task is None:
            s_job, s_task = clusters.slurm_task(jobs)
            job, task = job if job is not None else s_job, task if task is not None else s_task
    else:
        spec = clusters.ClusterSpec.from_json(source)
    if job is None or task is None:
        raise clusters.ClusterSpecError(f"{checks.show(source)}: say which task to serve with --job NAME --task I")
    where = "TF_CONFIG" if source == "TF_CONFIG" else "SLURM's environment" if source == "SLURM" \
        else f"cluster file {checks.path_text(source)}"
    if job not in spec.jobs:
        raise clusters.ClusterSpecError(f"{where} has no job {checks.show(job)} (jobs: "
                                        f"{', '.join(spec.jobs) or 'none'})")
    if task not in spec.task_indices(job):
        indices = spec.task_indices(job)
        shown = ", ".join(map(str, indices[:20])) + (f", ... ({len(indices)} tasks)" if len(indices) > 20 else "")
        raise clusters.ClusterSpecError(f"{where}: job '{job}' has no task {task} (tasks: {shown})")
    return spec, job, task


def _julia_start_seconds(folders: Sequence[str]) -> Optional[float]:
    """Start Julia before a server's op folders load, timed (None without op
    folders: such a server never starts Julia).  A worker's Julia start is
    part of its user's wait: the "ready" line reports it."""
    if not folders:
        return None
    import time

    from bridge import julia

    t0 = time.perf_counter()
    julia.init(ops=folders)  # from the image built for these ops, where one is current
    return time.perf_counter() - t0


def _server(args: argparse.Namespace) -> int:
    """Serve one task until SIGTERM or SIGINT; exit 0 then, 1 if it cannot start (saying why)."""
    import os
    import signal
    import time

    import warnings

    from bridge.distribute import ClusterSpecError, Server, ServerError, listen

    try:
        spec, job, task = _server_cluster(args)
    except ClusterSpecError as exc:
        print(f"tfbridge server: {exc}", file=sys.stderr)
        return 1
    address = spec.task_address(job, task)
    host = args.host if args.host is not None else address.rpartition(":")[0]
    port = int(address.rpartition(":")[2])
    try:  # before the op folders, whose builds take a while
        where = listen.listen_address(host)
        busy = listen.port_in_use(port, where)
    except listen.ListenError as exc:
        busy = str(exc)
    if busy:
        print(f"tfbridge server: cannot start /job:{job}/task:{task} ({address}): {busy}", file=sys.stderr)
        return 1
    stopping: list[int] = []

    def on_signal(signum, _frame):
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    julia_seconds = ops_seconds = None
    if args.ops:
        import time

        from bridge import customop

        try:
            julia_seconds = _julia_start_seconds(args.ops)
        except Exception as exc:  # noqa: BLE001 - a task that cannot start says why
            print(f"tfbridge server: Julia could not be started, so /job:{job}/task:{task} does not start: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        t0 = time.perf_counter()
        for folder in args.ops:
            try:
                customop.load(folder)
            except Exception as exc:  # noqa: BLE001 - any failure refuses the task, saying why
                print(f"tfbridge server: op folder {folder} could not be loaded, so /job:{job}/task:{task} does "
                      f"not start: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
            if stopping:
                return 0
        ops_seconds = time.perf_counter() - t0
        # Julia's start put its own SIGINT handler in front: ours again.
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            server = Server(spec, job, task, start=True, host=args.host)
    except ServerError as exc:
        print(f"tfbridge server: {exc}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"tfbridge server: note: {note.message}", file=sys.stderr, flush=True)
    ops = f" with ops from {', '.join(args.ops)}" if args.ops else ""
    if julia_seconds is not None:
        ops += f" (Julia started in {julia_seconds:.2f} s, ops loaded in {ops_seconds:.2f} s)"
    print(f"tfbridge server: ready /job:{job}/task:{task} target {server.target} address {address} "
          f"listening {server.listening} pid {os.getpid()}{ops}", flush=True)
    while not stopping:
        time.sleep(0.2)
    server.stop()  # a gRPC server serves until the process ends: this exit ends it
    print(f"tfbridge server: stopped /job:{job}/task:{task} ({signal.Signals(stopping[0]).name})", flush=True)
    return 0


def _fortran(args: argparse.Namespace) -> int:
    """Print the flags a Fortran program using the tf_bridge module compiles and links with."""
    from bridge import fortran

    try:
        query = next((q for q in fortran.QUERIES if getattr(args, q.replace("-", "_"))), None)
        print(fortran.main_flags(query, checked=args.checked))
    except fortran.FortranBuildError as exc:
        print(f"tfbridge: {exc}", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfbridge", description="tf-julia-bridge tools")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    customop = commands.add_parser("customop", help="Julia functions as TensorFlow ops",
                                   description="Build TensorFlow ops from custom_op.txt specs.")
    sub = customop.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("init", help="scaffold a new op (spec + working Julia example)")
    p.add_argument("name", metavar="NAME", help="op name in CamelCase, e.g. TwoLayer")
    p.add_argument("dir", metavar="DIR", nargs="?",
                   help="folder to create (default: the name in snake_case)")
    p.add_argument("--with-package", metavar="PKG", dest="packages", action="append", default=[],
                   help="a Julia package the op uses (repeatable): listed with its UUID in DIR/Project.toml, "
                        "the op's own environment, and loaded with `using` in its Julia file")
    p.add_argument("--fortran", action="store_true",
                   help="a Fortran op: custom_op.txt and a working <op>.f90 (docs/guides/fortran-ops.md)")
    p.set_defaults(run=_customop_init)

    p = sub.add_parser("build", help="generate and compile the op library (cached); several folders in parallel")
    p.add_argument("dirs", metavar="DIR", nargs="+", help="folder holding custom_op.txt (several: built at once, "
                                                          "one line per op)")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="how many folders to build at once (default: one per CPU, at most one per folder)")
    p.add_argument("--image", action="store_true",
                   help="then build Julia's system image holding these ops' packages and compiled code "
                        "(minutes; as `tfbridge julia build-image --ops DIR...`)")
    p.set_defaults(run=_customop_build)

    p = sub.add_parser("stub", help="print Julia skeletons of the spec's forward and backward functions")
    p.add_argument("dir", metavar="DIR", help="folder holding custom_op.txt")
    p.set_defaults(run=_customop_stub)

    for register in CUSTOMOP_ACTIONS:
        register(sub)

    p = commands.add_parser("gradtest", help="gradient test of a custom op (convergence of Taylor remainders)",
                            description="Build the op in DIR if needed, run its generated gradtest.py and "
                                        "write the log-log convergence plot.")
    p.add_argument("dir", metavar="DIR", help="folder holding custom_op.txt and the Julia file")
    p.add_argument("--plot", metavar="PATH", help="where to write the plot (default: DIR/gradcheck.png)")
    p.add_argument("--order", type=int, choices=(1, 2), default=1,
                   help="1: test the gradient (default); 2: the Hessian too (the gradient op's own gradient)")
    p.add_argument("--inputs", metavar="FILE",
                   help="values for the op's inputs and attributes: an .npz of arrays named like them, or a "
                        ".py file defining them (the others keep their random samples)")
    p.add_argument("--input", metavar="NAME=VALUE", action="append", default=[],
                   help="one input's or attribute's value, a Python literal such as 20 or [1, 2] "
                        "(repeatable; wins over --inputs)")
    p.set_defaults(run=_gradtest)

    p = commands.add_parser(
        "server", help="serve one task of a TensorFlow cluster (distributed runtime)",
        description="Start the TensorFlow server of one task of a cluster, print one 'ready' line with its "
                    "target and PID, and serve until SIGTERM or SIGINT (exit 0). A task that cannot start "
                    "says why and exits 1. The server listens on its task's own host only (localhost: "
                    "127.0.0.1), every interface only with --host 0.0.0.0. WARNING: TensorFlow's gRPC server "
                    "has no authentication and no encryption: whoever reaches its port can run any op, reading "
                    "files included (docs/guides/distributed.md, \"Security\": tunnels).")
    p.add_argument("--cluster", metavar="FILE", required=True,
                   help="the cluster: a JSON file (job -> addresses, or TF_CONFIG's form), or the words "
                        "TF_CONFIG or SLURM to read it from the environment")
    p.add_argument("--job", metavar="NAME", help="the job of the task to serve (default: from TF_CONFIG/SLURM)")
    p.add_argument("--task", metavar="I", help="the task index (default: from TF_CONFIG/SLURM)")
    p.add_argument("--ops", metavar="DIR", action="append", default=[],
                   help="an op folder to load first (built if needed, its Julia code included, its gradient "
                        "registered); repeatable")
    p.add_argument("--host", metavar="ADDR",
                   help="where to listen instead of the task's host in the cluster (a host name or IP address "
                        "of this machine; 0.0.0.0 or :: listens on every interface)")
    p.add_argument("--slurm-jobs", metavar="JOBS",
                   help="with --cluster SLURM: NAME=COUNT,... (one COUNT may be -1: the rest); default all workers")
    p.add_argument("--port-base", metavar="PORT", default="8888",
                   help="with --cluster SLURM: the first port of each node (default 8888)")
    p.set_defaults(run=_server)

    p = commands.add_parser("fortran", help="the tf_bridge Fortran module: its compile and link flags, CMake "
                                            "and pkg-config files",
                            description="Print the flags a program using the tf_bridge Fortran module needs (or "
                                        "where its CMake package config and pkg-config file are), for the copy "
                                        "`pip install .` built into the package, or else for one built (once) into "
                                        "the cache: gfortran prog.f90 $(tfbridge fortran --flags).")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--flags", action="store_true", help="compile and link flags (the default)")
    which.add_argument("--compile", action="store_true", help="only the compile flags (-I)")
    which.add_argument("--link", action="store_true", help="only the link flags")
    which.add_argument("--cmake-dir", action="store_true",
                       help="the folder of tf_bridge-config.cmake: cmake -Dtf_bridge_DIR=... for find_package(tf_bridge), "
                            "target tf_bridge::tf_bridge")
    which.add_argument("--prefix", action="store_true",
                       help="the module's folder, for CMAKE_PREFIX_PATH (find_package(tf_bridge) finds it there)")
    which.add_argument("--pkg-config-path", action="store_true",
                       help="the folder of tf_bridge.pc: PKG_CONFIG_PATH=... pkg-config --cflags --libs tf_bridge")
    p.add_argument("--checked", action="store_true",
                   help="a build of the module with every gfortran run-time check (-fcheck=all -g -fbacktrace), "
                        "for finding a program's mistakes: compile the program with -fcheck=all too")
    p.set_defaults(run=_fortran)
    julia = commands.add_parser("julia", help="the embedded Julia",
                                description="Tools for the Julia that runs Julia ops.")
    sub = julia.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("build-image", help="build Julia's system image with TFBridge in it (cached)",
                       description="Build, once per Julia and TFBridge sources, the system image that makes "
                                   "Julia start without compiling TFBridge (a few minutes; `make setup` runs "
                                   "it). Without it, Julia starts from its own image and includes TFBridge.jl.")
    p.add_argument("--ops", metavar="DIR", nargs="+", default=[],
                   help="build instead the image that also holds these op folders' Julia packages and the code "
                        "a run of them compiled; a process whose first loaded op is one of them starts from it")
    p.set_defaults(run=_julia_build_image)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from bridge.customop import BuildError, DynamicOutputWarning, MissingBackwardWarning, SpecError
    from bridge.framework._lib import LibraryNotFoundError

    try:
        with _notes_from_warnings((DynamicOutputWarning, MissingBackwardWarning)):
            return args.run(args)
    except (SpecError, BuildError, FileExistsError, FileNotFoundError, LibraryNotFoundError) as exc:
        print(f"tfbridge: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
