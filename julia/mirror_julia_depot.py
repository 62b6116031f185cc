#!/usr/bin/env python3
"""Mirror a Julia depot that was copied without its symbolic links.

Usage: mirror_julia_depot.py SOURCE DEST

Some copies of ../shared/julia-depot lost their symbolic links: each link
arrived as a small text file holding its target (git's form with
core.symlinks=false).  Julia then cannot load the JLL packages, whose
`override` link beside their sources is what points them at the local
libraries (JLLWrappers checks `isdir(.../override)`), so SpecialFunctions,
and ForwardDiff with it, fail to precompile ("Unable to automatically
install 'OpenLibm'").

DEST becomes a depot of symbolic links to SOURCE's files, in which every
such text file is a real symbolic link again, to the target it names
(relative targets stay relative, so they resolve inside the mirror as they
would have in SOURCE).  SOURCE is only read.  `make` runs this when it finds
the shared depot in that state (see the Makefile); a depot with its links
intact needs none of it.

Exit status 0 with DEST complete (DEST/.mirror-of names SOURCE), 1 on error.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

MAX_LINK_TEXT = 4096  # PATH_MAX: a longer file cannot be a link's target


def flattened_link(path: Path) -> str | None:
    """The target a flattened link at ``path`` names, or None for a real file.

    A flattened link is a regular, non-empty file whose whole content is one
    line with no line ending, naming a path (absolute, or relative to the
    file's folder) that exists."""
    try:
        if not path.is_file() or path.is_symlink() or not 0 < path.stat().st_size <= MAX_LINK_TEXT:
            return None
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "\n" in text or "\r" in text or "\0" in text or text.strip() != text:
        return None
    target = Path(text) if os.path.isabs(text) else path.parent / text
    try:
        return text if target.exists() else None
    except OSError:  # not a usable path (too long, ...): file content, not a link
        return None


def mirror(source: Path, dest: Path) -> int:
    """Build the mirror of ``source`` at ``dest`` (replacing it); the number of links restored."""
    links = {}
    for folder, _, files in os.walk(source):
        for name in files:
            target = flattened_link(Path(folder) / name)
            if target is not None:
                links[(Path(folder) / name).relative_to(source)] = target
    # The packages holding a flattened link (the JLLs) are copied, not linked:
    # precompiled files made from the broken copy (their `override` check is
    # decided at precompile time) then no longer match their sources, since
    # Julia compares the files themselves (samefile), and are rebuilt.
    copied = {rel.parts[:3] for rel in links if rel.parts[0] == "packages" and len(rel.parts) > 3}
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for folder, dirs, files in os.walk(source):
        rel = Path(folder).relative_to(source)
        (staging / rel).mkdir(parents=True, exist_ok=True)
        for name in list(dirs):
            if (Path(folder) / name).is_symlink():  # a real link to a folder: keep it as it is
                dirs.remove(name)
                os.symlink(os.readlink(Path(folder) / name), staging / rel / name)
        for name in files:
            original = Path(folder) / name
            if original.is_symlink():
                os.symlink(os.readlink(original), staging / rel / name)
            elif rel / name in links:
                os.symlink(links[rel / name], staging / rel / name)
            elif rel.parts[:3] in copied:
                shutil.copy2(original, staging / rel / name)
            else:
                os.symlink(original, staging / rel / name)
    (staging / ".mirror-of").write_text(f"{source}\n")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    return len(links)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 1
    source, dest = Path(argv[1]).resolve(), Path(argv[2]).absolute()
    if not (source / "packages").is_dir():
        print(f"mirror_julia_depot: {source} is not a Julia depot (no packages/ folder)", file=sys.stderr)
        return 1
    restored = mirror(source, dest)
    print(f">> {dest}: a mirror of the Julia depot {source} with its {restored} symbolic links "
          "restored (they arrived as text files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
