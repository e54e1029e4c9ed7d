"""File tools confined to the conversation's workspace: list, read, write, edit.

Each tool's input is a pydantic model (:class:`core.tools.inputs.ToolInput`), from
which the JSON schema the model sees is generated.

Every path the model gives is relative to ``ctx.workspace`` (an absolute path is
accepted only when it lies inside it) and goes through :func:`resolve_in_workspace`,
which resolves symlinks and refuses anything that lands outside. Files are UTF-8
text; file I/O runs in a worker thread (``asyncio.to_thread``) to keep the loop free.

Paths are checked, then used: a process that swaps a directory for a symlink in
between is not defended against (the workspace is the bot's own directory).
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from core.models.base import ToolKind, ToolSpec
from core.tools.base import ToolContext, ToolOutput
from core.tools.inputs import ToolInput
from core.vocabulary.errors import ToolError

LIST_LIMIT = 500
EDIT_LIMIT = 16 * 1024 * 1024
"""Bytes of the largest file ``edit_file`` edits: it holds the file in the bot's own
memory (twice, as bytes and as text), where no command cap applies."""
"""Entries ``list_files`` returns at most."""

_SKIPPED = frozenset({".git"})
_CHUNK = 64 * 1024


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The absolute, symlink-free path of ``path`` inside ``workspace``.

    ``path`` is relative to ``workspace`` (``""`` and ``"."`` are the workspace
    itself); an absolute path must lie inside it. Symlinks are resolved, also ones
    whose target does not exist yet. Raises :class:`ToolError` when the result is
    outside the workspace (an absolute path elsewhere, a ``..`` escape, a symlink
    pointing out) or the path is malformed (a NUL byte, a symlink loop).
    """
    try:
        root = workspace.resolve()
        resolved = (root / path).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ToolError(f"bad path {path!r}: {exc}") from exc
    if not resolved.is_relative_to(root):
        raise ToolError(f"{path!r} is outside the workspace; use a path relative to it")
    return resolved


def open_regular(target: Path, path: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of ``target`` opened with ``flags``, only if it is a regular file.

    Opens without blocking and without following a final symlink, then checks: a
    pipe, device or socket planted in the workspace would block the bot's own
    thread in ``open`` or ``read`` (a command may make one). Raises
    :class:`ToolError` (with :data:`_OS_ERRORS`' wording for the usual failures).
    """
    try:
        fd = os.open(target, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            raise ToolError(f"{path} is not a regular file") from exc
        raise _file_error(exc, path) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ToolError(f"{path} is a directory; use list_files")
        raise ToolError(f"{path} is not a regular file (a pipe, device or socket)")
    os.set_blocking(fd, True)
    return fd


_OS_ERRORS: tuple[tuple[type[OSError] | tuple[type[OSError], ...], str], ...] = (
    (FileNotFoundError, "no such file: {}"),
    (IsADirectoryError, "{} is a directory; use list_files"),
    ((NotADirectoryError, FileExistsError), "{}: a part of the path is a file, not a directory"),
    (PermissionError, "permission denied: {}"),
)


def _file_error(exc: OSError, path: str) -> ToolError:
    """The :class:`ToolError` the model is told for an ``OSError`` on ``path``."""
    for kinds, message in _OS_ERRORS:
        if isinstance(exc, kinds):
            return ToolError(message.format(path))
    return ToolError(f"{path}: {exc.strerror or exc}")


_PATH = "Path relative to the workspace root."


class ListFilesInput(ToolInput):
    """``list_files``: the directory to list (the workspace root by default)."""

    path: str | None = Field(".", description=_PATH)


class ReadFileInput(ToolInput):
    """``read_file``: the file, and the range of its lines to read (all by default)."""

    path: str = Field(description=_PATH)
    offset: int | None = Field(None, ge=1, description="First line, 1-based.")
    limit: int | None = Field(None, ge=1, description="Number of lines.")


class WriteFileInput(ToolInput):
    """``write_file``: the file, and its whole new text."""

    path: str = Field(description=_PATH)
    content: str = Field(description="The whole file.")


class EditFileInput(ToolInput):
    """``edit_file``: the file, the exact text to replace, and its replacement."""

    path: str = Field(description=_PATH)
    old: str = Field(description="Exact text to replace, non-empty.")
    new: str = Field(description="Replacement text.")


class ListFiles:
    """``list_files`` ``{"path": "."}``: workspace-relative paths under a directory, sorted.

    Recursive up to :data:`LIST_LIMIT` entries (the shallowest kept, a last line says
    so); directories end in ``/``; ``.git`` is skipped, symlinked dirs not entered.
    """

    spec = ToolSpec(
        name="list_files",
        description=(
            "List files and directories under a workspace directory, recursively "
            f"(at most {LIST_LIMIT} entries, shallowest first; .git is skipped). "
            "Paths are relative to the workspace root; directories end with '/'."
        ),
        input_schema=ListFilesInput.json_schema(),
        kind=ToolKind.READ_ONLY,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """List ``args["path"]``; raises :class:`ToolError` when it is not a directory."""
        path = ListFilesInput.parse(args).path or "."
        start = resolve_in_workspace(ctx.workspace, path)
        root = ctx.workspace.resolve()
        entries, capped = await asyncio.to_thread(_walk, root, start, path, LIST_LIMIT)
        lines = sorted(entries)
        if capped:
            lines.append(f"[... stopped at {LIST_LIMIT} entries; list a subdirectory for more]")
        content = "\n".join(lines) if lines else "[empty directory]"
        return ToolOutput(content=content, note=f"listed {len(entries)} entries in {path}")


def _walk(root: Path, start: Path, path: str, limit: int) -> tuple[list[str], bool]:
    """Up to ``limit`` paths under ``start``, breadth first, relative to ``root``.

    Returns ``(entries, capped)``; directories end with ``/``. Unreadable
    subdirectories are skipped. Raises :class:`ToolError` when ``start`` (the
    model's ``path``) is not a directory, or cannot be looked at (``ENAMETOOLONG``).
    """
    try:
        is_dir, exists = start.is_dir(), start.exists()
    except OSError as exc:  # a name too long for the file system, say
        raise _file_error(exc, path) from exc
    if not is_dir:
        if exists:
            raise ToolError(f"{path} is a file, not a directory; use read_file")
        raise ToolError(f"no such directory: {path}")
    entries: list[str] = []
    queue = deque([start])
    while queue:
        directory = queue.popleft()
        try:
            with os.scandir(directory) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for child in children:
            if child.name in _SKIPPED:
                continue
            if len(entries) == limit:
                return entries, True
            rel = Path(child.path).relative_to(root).as_posix()
            if child.is_dir(follow_symlinks=False):
                entries.append(rel + "/")
                queue.append(Path(child.path))
            else:
                entries.append(rel)
    return entries, False


class ReadFile:
    """``read_file``: a UTF-8 text file, or a range of its lines, within ``ctx.output_limit``.

    Input ``{"path", "offset"?, "limit"?}``: ``offset`` is the first line (1-based,
    default 1), ``limit`` the number of lines (default: to the end). The text is
    returned as stored; past ``ctx.output_limit`` characters it is cut and a last
    line says how many characters were left out. Raises :class:`ToolError` for a
    missing file, a directory, or a file that is not UTF-8 text (binary).
    """

    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a UTF-8 text file of the workspace. Long output is cut; use offset "
            "(first line, 1-based) and limit (number of lines) to read a part."
        ),
        input_schema=ReadFileInput.json_schema(),
        kind=ToolKind.READ_ONLY,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Read ``args["path"]``; see the class docstring for the errors."""
        given = ReadFileInput.parse(args)
        path, limit = given.path, given.limit
        offset = 1 if given.offset is None else given.offset
        target = resolve_in_workspace(ctx.workspace, path)
        text, more = await asyncio.to_thread(
            _read_range, target, path, offset, limit, ctx.output_limit
        )
        if more:
            text += f"\n[... {more} more characters]"
        elif not text:
            text = "[empty file]" if offset == 1 else f"[the file has fewer than {offset} lines]"
        return ToolOutput(content=text, note=f"read {path}")


def _read_range(
    target: Path, path: str, first: int, count: int | None, limit: int
) -> tuple[str, int]:
    """``(text, more)``: lines ``first..first+count-1`` of ``target``, cut to ``limit`` chars.

    ``more`` counts the characters of the range left out. Reads in chunks, so a
    huge file or line is never held whole. Raises :class:`ToolError`.
    """
    kept: list[str] = []
    room, more = limit, 0
    try:
        fd = open_regular(target, path)
        with open(fd, encoding="utf-8", newline="") as f:
            for piece in _line_range(iter(lambda: f.read(_CHUNK), ""), first, count):
                if "\0" in piece:
                    raise ToolError(f"{path} is not a text file")
                if room:
                    kept.append(piece[:room])
                more += max(0, len(piece) - room)
                room = max(0, room - len(piece))
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not a UTF-8 text file") from exc
    except OSError as exc:
        raise _file_error(exc, path) from exc
    return "".join(kept), more


def _line_range(chunks: Iterable[str], first: int, count: int | None) -> Iterator[str]:
    """The text of lines ``first..first+count-1`` (1-based; all to the end when ``count`` is
    None) of the text made of ``chunks``, in pieces, line endings kept."""
    last = None if count is None else first + count - 1
    line = 1
    for chunk in chunks:
        pos = 0
        while pos < len(chunk):
            if last is not None and line > last:
                return
            newline = chunk.find("\n", pos)
            end = len(chunk) if newline < 0 else newline + 1
            if line >= first:
                yield chunk[pos:end]
            if newline >= 0:
                line += 1
            pos = end


class WriteFile:
    """``write_file`` ``{"path", "content"}``: create or overwrite a UTF-8 file, making parents.

    Raises :class:`ToolError` when the path is a directory or cannot be written.
    """

    spec = ToolSpec(
        name="write_file",
        description=(
            "Create or overwrite a file in the workspace with the given text "
            "(parent directories are created). Prefer edit_file for small changes."
        ),
        input_schema=WriteFileInput.json_schema(),
        kind=ToolKind.MUTATING,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Write ``args["content"]`` to ``args["path"]``; returns the number of bytes."""
        given = WriteFileInput.parse(args)
        path, content = given.path, given.content
        target = resolve_in_workspace(ctx.workspace, path)
        size = await asyncio.to_thread(_write, target, path, content)
        return ToolOutput(content=f"wrote {size} bytes to {path}", note=f"wrote {path}")


def _write(target: Path, path: str, content: str) -> int:
    """Write ``content`` as UTF-8, creating parents; returns the byte count. Raises ToolError."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError("`content` is not valid Unicode text") from exc
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(open_regular(target, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as f:
            f.write(data)
    except OSError as exc:
        raise _file_error(exc, path) from exc
    return len(data)


class EditFile:
    """``edit_file`` ``{"path", "old", "new"}``: replace the one occurrence of ``old``.

    Raises :class:`ToolError` when ``old`` is empty or occurs zero or several times
    (the message says how many), the file is missing, not UTF-8 text, or larger than
    :data:`EDIT_LIMIT` (a command, ``sed -i`` say, edits those within its caps).
    """

    spec = ToolSpec(
        name="edit_file",
        description=(
            "Replace exact text in a workspace file. `old` must occur exactly once: "
            "include enough surrounding lines to make it unique. Whitespace counts."
        ),
        input_schema=EditFileInput.json_schema(),
        kind=ToolKind.MUTATING,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Edit ``args["path"]`` in place; the result names the line of the change."""
        given = EditFileInput.parse(args)
        path, old, new = given.path, given.old, given.new
        if not old:
            raise ToolError("`old` must not be empty; use write_file to create a file")
        target = resolve_in_workspace(ctx.workspace, path)
        line = await asyncio.to_thread(_edit, target, path, old, new)
        return ToolOutput(content=f"edited {path} at line {line}", note=f"edited {path}")


def _edit(target: Path, path: str, old: str, new: str) -> int:
    """Replace the single ``old`` by ``new``; returns its 1-based line. Raises ToolError."""
    try:
        with open(open_regular(target, path), "rb") as f:
            data = f.read(EDIT_LIMIT + 1)  # never more: the bot holds what it reads
        if len(data) > EDIT_LIMIT:
            raise ToolError(
                f"{path} is larger than {EDIT_LIMIT // 2**20} MB, the most edit_file edits: "
                "change it with a command (sed -i ...)"
            )
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not a UTF-8 text file") from exc
    except OSError as exc:
        raise _file_error(exc, path) from exc
    if "\0" in text:
        raise ToolError(f"{path} is not a text file")
    found = text.count(old)
    if found != 1:
        hint = "" if found == 0 else "; include more context so it matches once"
        raise ToolError(f"`old` occurs {found} times in {path}, not once{hint}")
    at = text.index(old)
    _write(target, path, text[:at] + new + text[at + len(old) :])
    return text.count("\n", 0, at) + 1
