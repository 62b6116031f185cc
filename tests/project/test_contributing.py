"""CONTRIBUTING.md's "where do I change X" table stays true: every file it
names exists, and every name it places in a file is defined (or, for C++ and
Julia, spelled) there."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import REPO


TEXT = (REPO / "CONTRIBUTING.md").read_text()
TABLE = TEXT.split("## Where do I change X", 1)[1].split("\n## ", 1)[0]
ROWS = [line for line in TABLE.splitlines() if line.startswith("| ") and not line.startswith("| ---")][1:]

_PATH = re.compile(r"`((?:bridge|kernels_cpp|julia|templates|tests|bench|examples|docs)/[\w./<>-]*"
                   r"|hatch_build\.py|pyproject\.toml|mkdocs\.yml|Makefile)`")
_TICKED = re.compile(r"`([^`]+)`")
# A name of code: an identifier, maybe qualified (a.b, a::b), with an underscore or a capital in it.
_CODE_NAME = re.compile(r"[A-Za-z_][\w]*(?:(?:\.|::)[A-Za-z_]\w*)*")


def _paths(row: str) -> list[str]:
    return [p for p in _PATH.findall(row) if "<" not in p]


def _code_names(row: str) -> list[str]:
    names = []
    for ticked in _TICKED.findall(row):
        if _CODE_NAME.fullmatch(ticked) and re.search(r"[_A-Z]", ticked) and not ticked.endswith((".py", ".md", ".j2", ".jl", ".h", ".cc", ".txt")):
            names.append(ticked)
    return names


def _ids(rows: list[str]) -> list[str]:
    return [r.split("|")[1].strip()[:40] for r in rows]


def test_the_table_has_the_rows_the_redesign_promised():
    wanted = ["add a dtype", "add a status code", "add an `@attr` type", "add a gradient", "change a template"]
    for want in wanted:
        assert any(row.startswith(f"| {want}") for row in ROWS), want


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_every_file_a_row_names_exists(row):
    for path in _paths(row):
        assert (REPO / path).exists(), f"CONTRIBUTING.md names {path}, which does not exist"


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_every_name_a_row_cites_is_in_a_file_it_names(row):
    files = [REPO / p for p in _paths(row) if (REPO / p).is_file()]
    text = "\n".join(f.read_text() for f in files)
    for name in _code_names(row):
        for part in re.split(r"\.|::", name):
            assert re.search(rf"\b{re.escape(part)}\b", text), \
                f"CONTRIBUTING.md cites {name}, but no file of its row ({', '.join(map(str, files))}) has {part}"


def test_the_name_check_is_not_vacuous():
    names = {n for row in ROWS for n in _code_names(row)}
    assert {"DTYPES", "ERROR_KINDS", "ATTR_KINDS", "OpBuilder.attr", "BUILD_TEMPLATES", "CASES"} <= names
