"""Saving a shared file into the conversation's workspace, safely.

A file the model cannot read inline (text past the limit, an image past the API's
limits, any other kind) is written to ``<workspace>/threadbot-shared/<name>``, where the
workspace tools and commands find it. The workspace is the agent's, so nothing in it is
trusted: the name is made safe (:func:`safe_name`: no directories, no leading dot, no
characters a shell or another system would read differently); the directory is opened
without following a symlink (a command may have left one there pointing anywhere); the
file is created exclusively, never over an existing file (``x.log`` taken: ``x-2.log``)
and never through a symlink. Blocking; the engine calls it in a thread.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

SHARED_DIR = "threadbot-shared"
"""The directory, inside the workspace, that shared files are saved in."""

MAX_NAME = 120
"""Characters of a saved file's name at most (its extension kept)."""

_UNSAFE = re.compile(r"[^\w.\- ]+")
"""Anything but letters, digits, ``_``, ``.``, ``-`` and spaces."""

_COPIES = 1000
"""Names tried (``x.log``, ``x-2.log``, ...) before giving up."""


def safe_name(name: str) -> str:
    """``name`` as a file name that stays where it is put: its last path part (either
    slash), unsafe characters as ``_``, no leading dot, dash (not an option to a
    command) or space, at most
    :data:`MAX_NAME` characters with the extension kept; ``"file"`` when nothing is left.
    """
    last = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", last).strip().lstrip(".- ")
    if not cleaned:
        return "file"
    path = PurePosixPath(cleaned)
    suffix = path.suffix if len(path.suffix) <= 16 else ""
    stem = cleaned[: len(cleaned) - len(suffix)] if suffix else cleaned
    return stem[: MAX_NAME - len(suffix)].rstrip() + suffix


def save_shared(workspace: Path, name: str, data: bytes) -> str:
    """Write ``data`` as a new file named after ``name`` in the workspace's
    :data:`SHARED_DIR`; returns its path relative to ``workspace``
    (``threadbot-shared/x-2.log``).

    Raises ``OSError`` when the workspace cannot take it: :data:`SHARED_DIR` is a
    symlink or not a directory, the disk is full, or every candidate name is taken.
    """
    wanted = safe_name(name)
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            os.mkdir(SHARED_DIR, 0o755, dir_fd=root)
        except FileExistsError:
            pass
        folder = os.open(SHARED_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
    finally:
        os.close(root)
    try:
        for candidate in _candidates(wanted):
            try:
                fd = os.open(
                    candidate,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                    0o644,
                    dir_fd=folder,
                )
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            return f"{SHARED_DIR}/{candidate}"
    finally:
        os.close(folder)
    raise FileExistsError(f"{SHARED_DIR}/ already holds {_COPIES} files named like {wanted}")


def _candidates(name: str) -> list[str]:
    """``name``, then ``stem-2.ext``, ``stem-3.ext``, ... (:data:`_COPIES` in all)."""
    path = PurePosixPath(name)
    stem, suffix = (path.stem, path.suffix) if path.stem else (name, "")
    return [name, *(f"{stem}-{n}{suffix}" for n in range(2, _COPIES + 1))]
