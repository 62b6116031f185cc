"""Helpers shared by the test packages (and the benchmarks): none of them is a test.

``tests/`` is on ``sys.path`` (tests/conftest.py), so a test module imports
``from support.build import op_folder``; the test modules themselves are
imported by pytest alone (``--import-mode=importlib``) and never by each other.
"""
from pathlib import Path

#: The checkout's root and its tests/ folder.
TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
