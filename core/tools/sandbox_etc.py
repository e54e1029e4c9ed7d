"""Where the sandbox's own ``/etc`` files live: ``passwd``, ``group``, ``resolv.conf``, ``hosts``.

A sandboxed command sees these few files in place of the host's
(:class:`core.tools.sandbox.Sandbox` binds them read-only). They are the same for
every process of one user that runs commands as the same user, so they are kept in
one directory those processes share (:func:`shared_etc`), written by a rename: a bot
killed before its exit handlers ran leaves nothing new behind in the temporary
directory (docs/architecture.md, "Tools and the sandbox").
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path


def written(files: Mapping[str, str], state_dir: Path | None = None) -> Path:
    """The directory holding ``files`` (name: text, each mode 0644), ``state_dir`` or, by
    default, :func:`shared_etc`'s; made readable by every user (bwrap, running as the
    command's user, reads them)."""
    etc = state_dir if state_dir is not None else shared_etc(files)
    etc.mkdir(parents=True, exist_ok=True)
    etc.chmod(0o755)
    for name, text in files.items():
        _write_atomically(etc / name, text)
    return etc


def shared_etc(files: Mapping[str, str]) -> Path:
    """The directory for the sandbox's ``/etc`` ``files`` (name: text), shared by every
    process of this user that writes the same ones: ``<tmp>/threadbot-sandbox-<uid>-<digest>``.

    Shared, not one per process, so a bot killed before its exit handlers ran (``kill
    -9``, the OOM killer) leaves nothing new behind. Taken only when it is a real
    directory (not a link) owned by this user and writable by no one else: a
    directory another user made there first could hold files of theirs. Otherwise a
    directory of this process's own, removed at exit.
    """
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"threadbot-sandbox-{os.geteuid()}-{digest}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o755)
    found = path.lstat()
    if stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o022:
        return path
    own = Path(tempfile.mkdtemp(prefix="threadbot-sandbox-"))
    atexit.register(shutil.rmtree, own, ignore_errors=True)
    return own


def _write_atomically(path: Path, text: str) -> None:
    """``text`` in ``path`` (mode 0644), by a rename, so a process reading the file while
    another writes the same text never reads half of it."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(name, 0o644)
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
