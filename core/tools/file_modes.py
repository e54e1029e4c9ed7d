"""What a command's files may keep on the host: no setuid or setgid bit, no open door.

A command may ``cp /usr/bin/id myid; chmod 4755 myid``: inside the sandbox the bit
does nothing (``no_new_privs``), but on the host the file would stay a working
setuid binary of the command's user for any local user who reaches it. So after
every command the workspace is walked (symbolic links are never followed) and each
setuid or setgid bit is cleared (:func:`strip_setid`), and the folder holding every
conversation's workspace is open to the bot alone (:func:`close_root`).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

SETID = stat.S_ISUID | stat.S_ISGID


def strip_setid(root: Path) -> int:
    """Clear the setuid and setgid bits of every file and folder under ``root`` (itself
    included), never following a symbolic link; how many were cleared (blocking).

    Each entry is opened with ``O_PATH | O_NOFOLLOW`` relative to its folder's
    descriptor and changed through that descriptor, so a path swapped for a link
    meanwhile is not followed. An entry that cannot be changed is logged and left.
    """
    if not root.is_dir() or root.is_symlink():
        return 0
    cleared = _clear(os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW))
    for _folder, subdirs, files, folder_fd in os.fwalk(root, follow_symlinks=False):
        for name in (*subdirs, *files):
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=folder_fd)
            except OSError:
                continue  # gone, or a name that vanished
            cleared += _clear(fd)
    return cleared


def _clear(fd: int) -> int:
    """Clear the set-id bits of the (already opened) ``fd``; 1 if it had any. Closes it."""
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode) or not mode & SETID:
            return 0
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(mode) & ~SETID)
    except OSError as exc:
        log.warning("cannot clear a setuid/setgid bit in a workspace: %s", exc.strerror)
        return 0
    finally:
        os.close(fd)
    return 1


def close_root(root: Path, group: int | None = None) -> None:
    """Make ``root`` (the folder of every conversation's workspace) reachable by the bot
    alone: mode 0700. With ``group`` (the gid commands run as, when a root bot without
    a sandbox runs them as another user), mode 0710 and that group: its members may
    pass through to a workspace, never list the others. Blocking; raises
    :class:`OSError`."""
    if group is None:
        root.chmod(0o700)
        return
    os.chown(root, -1, group)
    root.chmod(0o710)
