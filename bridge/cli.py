"""The ``tfbridge`` command.

    tfbridge customop init NAME [DIR] [--with-package PKG]...
                                        scaffold an op: custom_op.txt + a working Julia example
                                        (+ Project.toml listing the Julia packages it uses)
    tfbridge customop build DIR         generate and compile lib<Op>.so (cached)
    tfbridge customop stub DIR          print Julia skeletons for the spec's functions
    tfbridge gradtest DIR [--plot PATH] [--input NAME=VALUE]... [--inputs FILE]
                                        gradient test of the op (bridge.customop.gradtest)

Errors in the spec or the build print one message (file:line: what was
expected, or the compiler's errors) and exit 1, without a traceback;
gradtest exits 0 on PASS (or LINEAR), 1 on FAIL and 2 when the test cannot run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence


def _customop_init(args: argparse.Namespace) -> int:
    import warnings

    from bridge import customop

    directory = Path(args.dir) if args.dir else Path(customop.spec.snake_case(args.name))
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            written = customop.init(args.name, directory, packages=args.packages)
    except (customop.JuliaPackageError, ValueError) as exc:
        print(f"tfbridge: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    for note in notes:
        print(f"tfbridge: note: {note.message}", file=sys.stderr)
    print(f"next: edit them, then run 'tfbridge customop build {directory}'")
    return 0


def _customop_build(args: argparse.Namespace) -> int:
    from bridge import customop

    print(customop.build(args.dir))
    return 0


def _customop_stub(args: argparse.Namespace) -> int:
    from bridge import customop

    spec = customop.parse_file(Path(args.dir) / customop.SPEC_FILE)
    sys.stdout.write(customop.julia_stub(spec))
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
    return subprocess.call([sys.executable, str(script), "--plot", plot, *given])


CUSTOMOP_ACTIONS: list[Callable[[argparse._SubParsersAction], None]] = []


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
    p.set_defaults(run=_customop_init)

    p = sub.add_parser("build", help="generate and compile the op library (cached)")
    p.add_argument("dir", metavar="DIR", help="folder holding custom_op.txt")
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
    p.add_argument("--inputs", metavar="FILE",
                   help="values for the op's inputs and attributes: an .npz of arrays named like them, or a "
                        ".py file defining them (the others keep their random samples)")
    p.add_argument("--input", metavar="NAME=VALUE", action="append", default=[],
                   help="one input's or attribute's value, a Python literal such as 20 or [1, 2] "
                        "(repeatable; wins over --inputs)")
    p.set_defaults(run=_gradtest)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from bridge.customop import BuildError, SpecError

    try:
        return args.run(args)
    except (SpecError, BuildError, FileExistsError, FileNotFoundError) as exc:
        print(f"tfbridge: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
