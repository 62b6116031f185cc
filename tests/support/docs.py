"""The documentation's pages and their code blocks, for the tests that run them.

A test finds a block by its page, its language and a string only that block
holds (``block("docs/guides/training.md", "python", "ScipyOptimizer")``), so
that an edit of the page is tested as written; tests/project/test_docs.py
checks that every block of every page is run by a test or says why not.
"""
from __future__ import annotations

import re

from support import REPO

DOCS = REPO / "docs"

# Pages of the site whose text lives elsewhere (pymdownx.snippets includes it).
INCLUDED = {"docs/internals/contract.md": "kernels_cpp/include/tfjl/CONTRACT.md",
            "docs/internals/contributing.md": "CONTRIBUTING.md"}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def pages() -> list[str]:
    """README.md and every page of the site (docs/hooks/ holds the build's generators, not pages),
    the included files in the place of the pages that include them."""
    site = sorted(p.relative_to(REPO).as_posix() for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
    return ["README.md"] + [INCLUDED.get(p, p) for p in site]


def text(page: str) -> str:
    return (REPO / page).read_text()


def blocks(page: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block of the page, in order."""
    return _FENCE.findall(text(page))


def block(page: str, lang: str, containing: str) -> str:
    """The one block of the page in that language holding ``containing`` (for a spec, whose
    blocks have no language: its first line, ``"Sinc\\n"``)."""
    matches = [code for kind, code in blocks(page) if kind == lang and containing in code]
    assert len(matches) == 1, f"expected one {lang or 'plain'} block with {containing!r} in {page}, " \
                              f"found {len(matches)}"
    return matches[0]
