"""Copies of a workspace the bot makes itself: a delegation's copy, and the way back.

The workspace is the agent's: a command may have planted a symbolic link, a pipe or a
socket in it. So a copy never follows a link (it is copied as a link), leaves out
what is not a folder, a regular file or a link (a pipe would block the bot's thread,
a device cannot be made), and gives each file only its permission bits (never a
setuid or setgid bit). Blocking: the callers run these in a thread.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Collection
from pathlib import Path

from core.tools.workspace import open_regular, resolve_in_workspace
from core.vocabulary.errors import ToolError


def copy_tree(source: Path, target: Path) -> None:
    """Copy the folder ``source`` to ``target`` (made; with ``dirs_exist_ok`` semantics:
    an existing ``target`` is copied into). Raises ``OSError`` (``shutil.Error`` with
    every file that failed)."""
    shutil.copytree(source, target, symlinks=True, copy_function=_copy_file, dirs_exist_ok=True)


def _copy_file(source: str, target: str) -> None:
    """Copy ``source`` to ``target`` when it is a regular file (its bytes and permission
    bits); anything else (a pipe, a socket, a device) is left out."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ELOOP):  # a socket; a link swapped in
            return
        raise
    with open(fd, "rb") as src:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            return
        os.set_blocking(fd, True)
        with open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    os.chmod(target, stat.S_IMODE(mode) & 0o777)


def replace_contents(target: Path, source: Path, *, keep: Collection[str] = ()) -> None:
    """Make the folder ``target`` hold what ``source`` holds: its entries removed (a link
    removed, never followed), then ``source`` copied in (:func:`copy_tree`). A folder of
    ``target`` named in ``keep`` (a real folder, not a link) is not removed: ``source``'s
    is copied into it, so what only ``target`` holds there stays. Raises ``OSError``."""
    with os.scandir(target) as entries:
        for entry in entries:
            if entry.name in keep and entry.is_dir(follow_symlinks=False):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    copy_tree(source, target)


def carry(source: Path, target: Path, path: str) -> None:
    """Copy the regular file ``path`` (relative) of the workspace ``source`` to the same
    place in the workspace ``target``, neither end leaving its workspace nor following a
    link. Raises :class:`core.vocabulary.errors.ToolError` or ``OSError``."""
    origin = resolve_in_workspace(source, path)
    destination = resolve_in_workspace(target, path)
    with open(open_regular(origin, path), "rb") as src:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(destination, flags, 0o644), "wb") as dst:
            shutil.copyfileobj(src, dst)


def remove_file(workspace: Path, path: str) -> None:
    """Remove the file ``path`` (relative) of ``workspace`` if it is there (a link itself
    is removed, never followed; nothing outside the workspace is). Never raises."""
    parent, _, name = path.rpartition("/")
    try:
        os.unlink(resolve_in_workspace(workspace, parent or ".") / name)
    except (OSError, ToolError):
        pass
