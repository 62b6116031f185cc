"""Fuzz the custom_op.txt parser (bridge.customop.spec) and the code generator.

Start from valid specs (tests/golden/customop/*/custom_op.txt, the first op's
(docs/getting-started/first-op.md) and the example's, one that uses every extension), mutate them (random text and
bytes, encodings, byte-order marks, line endings, long names, huge and nested
dimensions, bad attribute defaults and directives, every token and line
dropped or duplicated) and check that:

* ``parse(text)``, ``parse(bytes)`` and ``parse_file(path)`` either return an
  OpSpec or raise ``SpecError``, whose message reads ``path:line: ...`` with
  a line of the input, on one printable line of reasonable length; nothing
  else escapes (no UnicodeDecodeError, RecursionError, ValueError, ...);
* the same text gives the same answer from a str, from its UTF-8 bytes (with
  or without a byte-order mark) and from a file;
* every spec that parses generates code: kernel_source, entries_source,
  cmake_lists, julia_stub and gradtest_script return text (the gradtest
  script compiles as Python), and the spec's source encodes as UTF-8 (the
  build's cache key hashes it).

Properties: ``text`` and ``file`` (hypothesis), ``tokens`` (exhaustive: each
token and each line of each seed dropped, then duplicated).

    python tests/fuzz/fuzz_spec.py --examples 2000 --derandomize
"""
from __future__ import annotations

import functools
import math
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

PROPERTIES = ["tokens", "text", "file"]
args = _common.parse_args(__doc__.split("\n\n")[0], PROPERTIES)

from hypothesis import given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bridge.customop import OpSpec, SpecError, codegen, forwarddiff, parse, parse_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
trace = _common.Tracer(args.trace)

# The templates are compiled once per Environment; the generator makes a new
# one per call.  Sharing one keeps the fuzzer fast and changes no output.
codegen._environment = functools.lru_cache(maxsize=None)(codegen._environment)

# ---------------------------------------------------------------- seeds

EVERYTHING = """\
# Every extension at once.  "quotes" and # inside comments
AllOfIt
double x(n)                     # a named dimension
float w(m, n)
int32 k()
int64 idx(?, 2)
bool mask(n)
string words(?)
float64 a4(2, 3, 4, 5)
float32 z(n*n) -> output
double y(m*n + 1) -> output
int d((n+1)//2, m - 1) -> output
string o(?) -> output
double p(?, q) -> output
@attr double alpha = 0.5
@attr float beta = -1e-3
@attr int64 steps = 3
@attr int count = -7
@attr bool flag = false
@attr string mode = "fast # not a comment"
@attr double gamma
@forward all_of_it!
@backward all_of_it_back!
"""

SINC = "Sinc\ndouble x(n)\ndouble y(n) -> output\n"


def _seeds() -> list[tuple[str, str]]:
    seeds = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / "tests" / "golden" / "customop").glob("*/custom_op.txt"))]
    example = ROOT / "examples" / "twolayer" / "custom_op.txt"
    if example.is_file():
        seeds.append((str(example.relative_to(ROOT)), example.read_text(encoding="utf-8")))
    seeds += [("first op Sinc", SINC), ("every extension", EVERYTHING)]
    return seeds


SEEDS = _seeds()

# ---------------------------------------------------------------- checks

_NEWLINE = re.compile(r"\r\n|\r|\n")
MAX_MESSAGE = 1000
STATS = {"parsed": 0, "refused": 0}


def line_count(text: str) -> int:
    return len(_NEWLINE.split(text))


def check_error(exc: SpecError, path: str, lines: int) -> str:
    text = str(exc)
    assert exc.path == path, (exc.path, path)
    assert isinstance(exc.line, int) and 1 <= exc.line <= max(lines, 1), \
        f"line {exc.line} is not a line of the {lines}-line input: {text!r}"
    assert text.startswith(f"{path}:{exc.line}: "), f"message does not start with path:line: {text!r}"
    assert text.isprintable(), f"message is not one printable line: {text!r}"
    assert len(exc.message) <= MAX_MESSAGE, f"message of {len(exc.message)} characters: {text[:300]!r}..."
    assert exc.message.strip(), "empty message"
    return f"SpecError at line {exc.line}: {exc.message}"


def check_spec(spec: OpSpec) -> str:
    assert isinstance(spec, OpSpec), type(spec)
    assert spec.outputs, "a spec without outputs parsed"
    spec.source.encode("utf-8")  # build.cache_key hashes it
    for arg in spec.inputs + spec.outputs:
        for dim in arg.shape:
            if isinstance(dim, int):
                assert 0 <= dim < 2**63, f"dimension {dim} of {arg.name} does not fit int64"
    for attr in spec.attrs:
        if isinstance(attr.default, float):
            assert math.isfinite(attr.default), attr
        if isinstance(attr.default, int) and not isinstance(attr.default, bool):
            assert -2**63 <= attr.default < 2**63, attr
    for name, fn in [("kernel_source", codegen.kernel_source), ("cmake_lists", codegen.cmake_lists),
                     ("julia_stub", codegen.julia_stub)]:
        out = fn(spec)
        assert isinstance(out, str) and out, f"{name} returned {type(out).__name__}"
    entries = codegen.entries_source(spec)
    assert entries is None or isinstance(entries, str)
    gradient = forwarddiff.gradient_source(spec)  # @gradient forwarddiff
    assert (gradient is None) == (not spec.gradient), "forwarddiff_source disagrees with @gradient"
    # Nothing from the spec may interpolate in the generated Julia (its templates have no '$').
    for name, out in [("julia_stub", codegen.julia_stub(spec)), ("entries_source", entries or ""),
                      ("forwarddiff_source", gradient or "")]:
        assert "$" not in out, f"{name} has a '$' (Julia interpolation) from the spec"
    script = codegen.gradtest_script(spec)
    compile(script, "gradtest.py", "exec")
    return f"OpSpec {spec.name}: {len(spec.inputs)} inputs, {len(spec.outputs)} outputs, {len(spec.attrs)} attrs"


def outcome_of(call, path: str, lines: int) -> str:
    """Run one parse; the description of what it gave (any other exception escapes)."""
    try:
        spec = _common.time_limited(args.example_timeout, call)
    except SpecError as exc:
        STATS["refused"] += 1
        return check_error(exc, path, lines)
    STATS["parsed"] += 1
    return check_spec(spec)


def check_text(text: str, path: str = "dir/custom_op.txt") -> str:
    trace(f"parse(text, {path!r}) with text =\n{_common.short(text, 20000)}")
    return outcome_of(lambda: parse(text, path), path, line_count(text))


# ---------------------------------------------------------------- mutations

_TOKEN = re.compile(r"\s+|[A-Za-z_][A-Za-z0-9_]*!?|[0-9]+|->|//|@\w+|\S")

VOCABULARY = [
    "double", "float", "int32", "int64", "bool", "string", "float64", "float32", "int", "uint8", "complex",
    "->", "output", "input", "(", ")", "((", "))", ",", ",,", "?", "??", "*", "//", "/", "+", "-", "**", "%",
    "@attr", "@forward", "@backward", "@", "=", "==", "#", '"', "'", "\\", "!", " ", "\t", "\n", "\r\n", "\r",
    "0", "1", "-1", "2", "007", "18446744073709551616", "1180591620717411303424", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "1e3", "0x10", "1_000", "\u0663", "\uff11", "\u00b2",
    "n", "m", "x", "y", "X", "Op", "TwoLayer", "end", "function", "ctx", "std", "int64_t", "grad_x",
    "y_shape", "x_0", "alpha_", "alpha_value", "_", "__", "é", "名前", "\x00", "\ufeff", "\u00a0", "\u2028",
    "\x0c", "\x0b", "\x85", "\ud800", "\U0001f600", "true", "false", "True", "nan", "inf", "1e999", "-0",
]

INTERESTING_NUMBERS = [
    "0", "1", "-1", "2", "00", "0" * 50 + "1", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "1180591620717411303424", "9" * 30, "9" * 5000, "1" * 4301, "1e3", "1.5",
    "\u0663", "-0", "+3", "2**70", "(2)", "((((((((((((((((((((((((((((((((((1))))))))))))))))))))))))))))))))))",
]

LONG_NAMES = st.builds(lambda c, n: c * n, st.sampled_from(["a", "x_", "A", "n1", "é"]),
                       st.sampled_from([1, 2, 100, 127, 128, 129, 255, 256, 1000, 5000]))

NAMES = st.one_of(
    st.sampled_from(["x", "y", "n", "m", "h", "k", "alpha", "grad_x", "grad_y", "y_shape", "x_0", "alpha_",
                     "alpha_value", "end", "function", "ctx", "args", "std", "int", "double", "X", "Op",
                     "_x", "x!", "1x", "x-y", "é", "ñame", "__", "_", "Twice", "TwoLayer"]),
    LONG_NAMES,
    st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True),
)

ATTR_TYPES = ["double", "float", "int64", "int", "int32", "bool", "string", "float64", "float32", "str", "Int64"]
ATTR_DEFAULTS = [
    None, "0.5", "-1e-3", "1e38", "3.4e38", "3.5e38", "1e39", "1e999", "-1e999", "1e-38", "1e-39", "1e-46",
    "1e-400", "nan", "inf", "-inf", ".5", "5.", "1e", "e5", "0x1p3", "1_000", "\u0663", "1" * 5000,
    "0", "-0", "42", "-7", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "0" * 40 + "7", "1" * 4400,
    "true", "false", "True", "1", "yes",
    '""', '"fast"', '"$x"', '"$(1+1)"', '"a%b"', '"a#b"', '"a b"', '"unterminated', '"\\"', '"a\\"b"', '"é"', '"\t"', '"' + "z" * 5000 + '"',
    "", "=", "= 1",
]
JULIA_NAMES = ["f", "f!", "f!!", "my_op", "MyOp", "_", "__", "_!", "end", "function", "begin", "where", "in",
               "1f", "f-g", "f g", "", "f.g", "∇f", "f" * 3000]


@st.composite
def mutated_text(draw, max_mutations: int = 4) -> str:
    name, text = draw(st.sampled_from(SEEDS))
    note(f"seed: {name}")
    for _ in range(draw(st.integers(0, max_mutations))):
        kind = draw(st.sampled_from(MUTATIONS))
        text = kind(draw, text)
        note(f"after {kind.__name__}: {_common.short(text, 2000)}")
    return text


def _pos(draw, text: str) -> int:
    return draw(st.integers(0, len(text)))


def insert_text(draw, text):
    i = _pos(draw, text)
    piece = draw(st.one_of(st.text(max_size=12), st.sampled_from(VOCABULARY)))
    return text[:i] + piece + text[i:]


def replace_span(draw, text):
    i = _pos(draw, text)
    j = min(len(text), i + draw(st.integers(0, 12)))
    return text[:i] + draw(st.one_of(st.text(max_size=8), st.sampled_from(VOCABULARY))) + text[j:]


def token_edit(draw, text):
    tokens = _TOKEN.findall(text)
    if not tokens:
        return text
    i = draw(st.integers(0, len(tokens) - 1))
    how = draw(st.sampled_from(["drop", "dup", "swap", "replace"]))
    if how == "drop":
        del tokens[i]
    elif how == "dup":
        tokens.insert(i, tokens[i])
    elif how == "swap" and i + 1 < len(tokens):
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
    else:
        tokens[i] = draw(st.sampled_from(VOCABULARY))
    return "".join(tokens)


def line_edit(draw, text):
    lines = text.split("\n")
    i = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["drop", "dup", "swap", "shuffle", "front", "repeat"]))
    if how == "drop":
        del lines[i]
    elif how == "dup":
        lines.insert(i, lines[i])
    elif how == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "shuffle":
        lines = draw(st.permutations(lines))
    elif how == "front":
        lines.insert(0, lines.pop(i))
    else:  # many arguments: the line repeated with numbered names
        count = draw(st.sampled_from([10, 100, 500]))
        lines[i + 1:i + 1] = [re.sub(r"\b([a-z][a-z0-9_]*)\(", rf"\g<1>{k}(", lines[i]) for k in range(count)]
    return "\n".join(lines)


def number_edit(draw, text):
    spots = [m.span() for m in re.finditer(r"[0-9]+|\?", text)]
    if not spots:
        return text
    i, j = draw(st.sampled_from(spots))
    return text[:i] + draw(st.sampled_from(INTERESTING_NUMBERS)) + text[j:]


def name_edit(draw, text):
    spots = [m.span() for m in re.finditer(r"\b[A-Za-z_][A-Za-z0-9_]*!?", text)]
    if not spots:
        return text
    i, j = draw(st.sampled_from(spots))
    return text[:i] + draw(NAMES) + text[j:]


def shape_edit(draw, text):
    spots = [m.span() for m in re.finditer(r"\([^()\n]*\)", text)]
    if not spots:
        return text
    i, j = draw(st.sampled_from(spots))
    depth = draw(st.sampled_from([1, 31, 32, 33, 100, 2000]))
    length = draw(st.sampled_from([2, 99, 100, 101, 1000, 5000]))
    op = draw(st.sampled_from(["*", "+", "-", "//"]))
    shape = draw(st.sampled_from([
        "(" + "(" * depth + "n" + ")" * depth + ")",
        "(" + op.join(["n"] * length) + ")",
        "(" + op.join(["2"] * length) + ")",
        "(" + ",".join(["?"] * length) + ")",
        "(" + ",".join(["n"] * min(length, 300)) + ")",
        "(n//0)", "(n//(m-m))", "(4//(2-2))", "(1-2)", "(n-n)", "(0)", "(0,0)", "()", "( )", "(,)", "(?,)",
        "(9223372036854775807)", "(9223372036854775807+1)", "(4294967296*4294967296)", "(3037000500*3037000500)",
        "(n*9223372036854775807)", "(-9223372036854775807-1)", "(n, n)", "(N)", "(n m)", "(n)(m)", "((n)",
        "(n))", "(" + "(" * depth + ")",
    ]))
    return text[:i] + shape + text[j:]


def attr_line(draw, text):
    kind = draw(st.sampled_from(ATTR_TYPES))
    name = draw(NAMES)
    default = draw(st.sampled_from(ATTR_DEFAULTS))
    line = f"@attr {kind} {name}" + ("" if default is None else f" = {default}")
    lines = text.split("\n")
    lines.insert(draw(st.integers(0, len(lines))), line)
    return "\n".join(lines)


def directive_line(draw, text):
    word = draw(st.sampled_from(["@forward", "@backward", "@attr", "@Forward", "@", "@@forward", "@forward\t"]))
    line = f"{word} {draw(st.sampled_from(JULIA_NAMES))}"
    lines = text.split("\n")
    lines.insert(draw(st.integers(0, len(lines))), line)
    return "\n".join(lines)


# Whitespace and line-ending edits of a whole spec, by name.
_WHITESPACE_EDITS = {
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "cr": lambda t: t.replace("\n", "\r"),
    "u2028": lambda t: t.replace("\n", "\u2028"),
    "formfeed": lambda t: t.replace("\n", "\n\x0c", 1),
    "tabs": lambda t: t.replace(" ", "\t"),
    "nbsp": lambda t: t.replace(" ", "\u00a0"),
    "trailing": lambda t: t.replace("\n", "   \n"),
    "nul": lambda t: t.replace("\n", "\x00\n", 1),
    "no-final-newline": lambda t: t.rstrip("\n"),
    "blank-lines": lambda t: "\n\n\n" + t.replace("\n", "\n\n"),
    "indent": lambda t: t.replace("\n", "\n    "),
}


def whitespace_edit(draw, text):
    return _WHITESPACE_EDITS[draw(st.sampled_from(sorted(_WHITESPACE_EDITS)))](text)


def bom_edit(draw, text):
    return draw(st.sampled_from(["\ufeff", "\ufeff\ufeff", "\ufeff\n", "\n\ufeff"])) + text


def comment_edit(draw, text):
    i = _pos(draw, text)
    return text[:i] + draw(st.sampled_from(["#", "# x", '"', '"#"', "#\"", " # ()", "##"])) + text[i:]


def whole_edit(draw, text):
    how = draw(st.sampled_from(["double", "empty", "spaces", "comments", "truncate", "huge"]))
    if how == "double":
        return text + text
    if how == "empty":
        return ""
    if how == "spaces":
        return " \n\t\n"
    if how == "comments":
        return "\n".join("# " + line for line in text.split("\n"))
    if how == "truncate":
        return text[:_pos(draw, text)]
    return text + ("# " + "x" * 1000 + "\n") * 200


MUTATIONS = [insert_text, replace_span, token_edit, token_edit, line_edit, number_edit, name_edit, name_edit,
             shape_edit, attr_line, attr_line, directive_line, whitespace_edit, bom_edit, comment_edit,
             whole_edit]

ENCODINGS = ["utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252",
             "shift_jis", "utf-8-surrogatepass"]


@st.composite
def spec_bytes(draw) -> tuple[str, str, bytes]:
    text = draw(mutated_text(max_mutations=2))
    encoding = draw(st.sampled_from(ENCODINGS))
    if encoding == "utf-8-surrogatepass":
        data = text.encode("utf-8", errors="surrogatepass") + "\ud800".encode("utf-8", errors="surrogatepass")
    else:
        data = text.encode(encoding, errors="replace" if encoding not in ("utf-8", "utf-8-sig") else "surrogatepass")
    for _ in range(draw(st.integers(0, 2))):
        how = draw(st.sampled_from(["insert", "flip", "truncate"]))
        i = draw(st.integers(0, len(data)))
        if how == "insert":
            data = data[:i] + draw(st.binary(min_size=1, max_size=4)) + data[i:]
        elif how == "flip" and i < len(data):
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
        else:
            data = data[:i]
    return text, encoding, data


# ---------------------------------------------------------------- properties

def prop_tokens() -> None:
    """Every token, then every line, of every seed dropped, then duplicated."""
    for name, text in SEEDS:
        check_text(text)  # the seeds themselves parse
        tokens = _TOKEN.findall(text)
        for i in range(len(tokens)):
            check_text("".join(tokens[:i] + tokens[i + 1:]))
            check_text("".join(tokens[:i + 1] + tokens[i:]))
        lines = text.split("\n")
        for i in range(len(lines)):
            check_text("\n".join(lines[:i] + lines[i + 1:]))
            check_text("\n".join(lines[:i + 1] + lines[i:]))
    for name, text in SEEDS:
        assert check_text(text).startswith("OpSpec"), f"seed {name} does not parse: {check_text(text)}"


@given(mutated_text())
def prop_text(text: str) -> None:
    outcome = check_text(text)
    note(outcome)
    # The same text as UTF-8 bytes, with and without a byte-order mark, gives the same answer.
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: only a str can hold them
        return
    trace(f"parse(bytes) of {_common.short(text, 20000)}")
    for raw in (data, b"\xef\xbb\xbf" + data):
        again = outcome_of(lambda: parse(raw, "dir/custom_op.txt"), "dir/custom_op.txt", line_count(text))
        assert again == outcome or text.startswith("\ufeff") and raw.startswith(b"\xef\xbb\xbf"), \
            f"parse(text) gave {outcome!r}, parse(its UTF-8 bytes) {again!r}"


_TMP = tempfile.TemporaryDirectory(prefix="tfbridge-fuzz-spec-")


@given(spec_bytes())
def prop_file(case) -> None:
    text, encoding, data = case
    path = os.path.join(_TMP.name, "custom_op.txt")
    with open(path, "wb") as f:
        f.write(data)
    trace(f"parse_file of bytes {_common.short(data, 20000)} (from {encoding})")
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        decoded = None
    # Lines are only known here for UTF-8; elsewhere only 'line >= 1' is checked.
    outcome = outcome_of(lambda: parse_file(path), path, line_count(decoded) if decoded is not None else 10**9)
    note(outcome)
    from_bytes = outcome_of(lambda: parse(data, path), path, 10**9)
    assert from_bytes == outcome, f"parse_file gave {outcome!r}, parse(bytes) {from_bytes!r}"
    if decoded is not None:  # plain UTF-8: the same as parsing the text
        from_text = outcome_of(lambda: parse(decoded, path), path, line_count(decoded))
        assert from_text == outcome, f"parse_file gave {outcome!r}, parse(decoded text) {from_text!r}"


def main() -> int:
    props = {"tokens": prop_tokens, "text": prop_text, "file": prop_file}
    chosen = args.property or PROPERTIES
    status = 0
    if "tokens" in chosen:  # not hypothesis: run once, fully
        import time
        start = time.monotonic()
        try:
            prop_tokens()
            print(f"ok tokens ({time.monotonic() - start:.1f} s)", flush=True)
        except Exception:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            print("FAILED tokens", flush=True)
            status = 1
        args.property = [p for p in chosen if p != "tokens"]
        if not args.property:
            return status
    status |= _common.run("tests/fuzz/fuzz_spec.py", args, {k: v for k, v in props.items() if k != "tokens"})
    print(f"specs parsed: {STATS['parsed']}, refused with SpecError: {STATS['refused']}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
