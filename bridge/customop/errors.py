"""SpecError, the one exception a malformed custom_op.txt raises, and the
helpers that quote a spec's text in its messages; BuildError, what a build
that cannot finish raises."""
from __future__ import annotations

__all__ = ["SpecError", "BuildError", "printable", "show"]


def printable(text: str) -> str:
    """``text`` with control and other invisible characters escaped (\\n, \\x00, \\ufeff)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def show(text: str, limit: int = 80) -> str:
    """A fragment of the spec for a message: escaped, and cut at ``limit`` characters."""
    text = printable(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class SpecError(ValueError):
    """A malformed custom_op.txt; the message reads ``path:line: what was expected``."""

    def __init__(self, path: str, line: int, message: str):
        message = printable(message)  # one line, whatever the spec held
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


class BuildError(RuntimeError):
    """The op could not be built; the message shows the compiler's errors,
    pointing at the generated source, and where the full log is."""
