"""The model works in a conversation's workspace: it lists, reads, writes and edits
files there and runs commands; it never reaches outside, and a timeout or a stop
leaves no process of the command behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from pathlib import Path
from typing import Any, cast

import pytest

from bot.sandboxing import command_groups
from core.secrets import Redactor
from core.tools import command
from core.tools.base import Tool, Toolbox, ToolContext
from core.tools.cgroups import CommandGroups
from core.tools.command import RunCommand
from core.tools.workspace import (
    EDIT_LIMIT,
    LIST_LIMIT,
    EditFile,
    ListFiles,
    ReadFile,
    WriteFile,
    resolve_in_workspace,
)
from core.vocabulary.errors import ToolError

# Starts a background child, publishes "<shell pid> <child pid>" atomically, waits.
SPAWN_AND_WAIT = 'echo started; sleep 600 & echo "$$ $!" > pids.tmp && mv pids.tmp pids; wait'


def ctx_for(workspace: Path, **limits: Any) -> ToolContext:
    return ToolContext(workspace=workspace, **limits)


def is_live(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, waiting for its parent) is not live."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def real(path: Path) -> Path:
    """``path`` with symlinks resolved (tmp dirs can sit behind one)."""
    return path.resolve()


def read_pids(path: Path) -> list[int] | None:
    """The pids in ``path``, or None while the file does not exist."""
    return [int(p) for p in path.read_text().split()] if path.exists() else None


def is_reaped(pid: int) -> bool:
    """True when ``pid`` is gone entirely: dead and waited for."""
    return not Path(f"/proc/{pid}").exists()


async def wait_for_pids(path: Path, task: asyncio.Task[object] | None = None) -> list[int]:
    """The pids the command wrote to ``path``; fails after 10 s or if ``task`` ended."""
    deadline = time.monotonic() + 10
    while (pids := read_pids(path)) is None:
        assert time.monotonic() < deadline, "the command never wrote its pids"
        assert task is None or not task.done(), "the command ended early"
        await asyncio.sleep(0.01)
    return pids


# --- files -------------------------------------------------------------------


async def test_write_list_read_and_edit_a_file(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    wrote = await WriteFile().run({"path": "src/app.py", "content": "x = 1\ny = 2\n"}, ctx)
    assert wrote.content == "wrote 12 bytes to src/app.py"
    assert wrote.note == "wrote src/app.py"

    listed = await ListFiles().run({}, ctx)
    assert listed.content == "src/\nsrc/app.py"
    assert listed.note == "listed 2 entries in ."

    edited = await EditFile().run({"path": "src/app.py", "old": "y = 2", "new": "y = 3"}, ctx)
    assert (edited.content, edited.note) == ("edited src/app.py at line 2", "edited src/app.py")

    read = await ReadFile().run({"path": "src/app.py"}, ctx)
    assert (read.content, read.note) == ("x = 1\ny = 3\n", "read src/app.py")
    assert (tmp_path / "src" / "app.py").read_text() == "x = 1\ny = 3\n"


async def test_listing_marks_directories_skips_git_and_stays_in_the_subdirectory(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    (tmp_path / "docs" / "api").mkdir(parents=True)
    (tmp_path / "docs" / "api" / "b.md").write_text("")
    (tmp_path / "docs" / "a.md").write_text("")
    (tmp_path / "README").write_text("")

    everything = await ListFiles().run({"path": "."}, ctx_for(tmp_path))
    assert everything.content.splitlines() == [
        "README",
        "docs/",
        "docs/a.md",
        "docs/api/",
        "docs/api/b.md",
    ]
    docs = await ListFiles().run({"path": "docs"}, ctx_for(tmp_path))
    assert docs.content.splitlines() == ["docs/a.md", "docs/api/", "docs/api/b.md"]
    api = await ListFiles().run({"path": "docs/api/"}, ctx_for(tmp_path))
    assert (api.content, api.note) == ("docs/api/b.md", "listed 1 entries in docs/api/")


async def test_a_path_too_long_to_look_at_is_a_one_line_error(tmp_path: Path) -> None:
    path = "/".join(["b" * 200] * 30)  # past PATH_MAX: os.stat raises ENAMETOOLONG
    with pytest.raises(ToolError, match="File name too long"):
        await ListFiles().run({"path": path}, ctx_for(tmp_path))


async def test_a_big_tree_is_listed_up_to_the_cap_shallowest_first(tmp_path: Path) -> None:
    (tmp_path / "deep").mkdir()
    for i in range(LIST_LIMIT + 10):
        (tmp_path / "deep" / f"f{i:04}").write_text("")
    (tmp_path / "top.txt").write_text("")

    listed = await ListFiles().run({}, ctx_for(tmp_path))
    lines = listed.content.splitlines()
    assert len(lines) == LIST_LIMIT + 1
    assert "top.txt" in lines and "deep/" in lines
    assert lines[-1].startswith(f"[... stopped at {LIST_LIMIT} entries")


async def test_listing_a_file_or_a_missing_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("")
    with pytest.raises(ToolError, match=re.escape("a.txt is a file")):
        await ListFiles().run({"path": "a.txt"}, ctx_for(tmp_path))
    with pytest.raises(ToolError, match="no such directory: nope"):
        await ListFiles().run({"path": "nope"}, ctx_for(tmp_path))


async def test_read_a_range_of_lines(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    ctx = ctx_for(tmp_path)
    part = await ReadFile().run({"path": "n.txt", "offset": 3, "limit": 2}, ctx)
    assert part.content == "line 3\nline 4\n"
    tail = await ReadFile().run({"path": "n.txt", "offset": 10}, ctx)
    assert tail.content == "line 10\n"
    past = await ReadFile().run({"path": "n.txt", "offset": 11}, ctx)
    assert past.content == "[the file has fewer than 11 lines]"


async def test_a_long_file_is_cut_at_the_output_limit(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("a" * 100_000 + "\n" + "b" * 50)
    read = await ReadFile().run({"path": "big.txt"}, ctx_for(tmp_path, output_limit=1000))
    assert read.content == "a" * 1000 + f"\n[... {100_051 - 1000} more characters]"


async def test_reading_a_missing_binary_or_directory_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    (tmp_path / "nul.dat").write_bytes(b"abc\x00def")
    (tmp_path / "dir").mkdir()
    ctx = ctx_for(tmp_path)
    with pytest.raises(ToolError, match=r"^no such file: x$"):
        await ReadFile().run({"path": "x"}, ctx)
    with pytest.raises(ToolError, match="not a UTF-8 text file"):
        await ReadFile().run({"path": "blob.bin"}, ctx)
    with pytest.raises(ToolError, match="not a text file"):
        await ReadFile().run({"path": "nul.dat"}, ctx)
    with pytest.raises(ToolError, match="is a directory"):
        await ReadFile().run({"path": "dir"}, ctx)


async def test_edit_needs_exactly_one_match(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\nx = 1\n")
    ctx = ctx_for(tmp_path)
    with pytest.raises(ToolError, match="occurs 0 times"):
        await EditFile().run({"path": "a.py", "old": "y", "new": "z"}, ctx)
    with pytest.raises(ToolError, match=r"occurs 2 times.*more context"):
        await EditFile().run({"path": "a.py", "old": "x = 1", "new": "z"}, ctx)
    with pytest.raises(ToolError, match=re.escape("no such file: b.py")):
        await EditFile().run({"path": "b.py", "old": "x", "new": "z"}, ctx)
    assert (tmp_path / "a.py").read_text() == "x = 1\nx = 1\n"


async def test_a_file_past_the_edit_limit_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as f:  # one byte past the limit (sparse: nothing is written)
        f.truncate(EDIT_LIMIT + 1)
    ctx = ctx_for(tmp_path)

    with pytest.raises(ToolError, match=r"larger than 16 MB, the most edit_file edits"):
        await EditFile().run({"path": "big.txt", "old": "x", "new": "y"}, ctx)

    assert big.stat().st_size == EDIT_LIMIT + 1


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        (ReadFile(), {}, "`path` is required"),
        (ReadFile(), {"path": 3}, "`path` must be a string, got int"),
        (ReadFile(), {"path": "a", "offset": True}, "`offset` must be an integer"),
        (ReadFile(), {"path": "a", "offset": 0}, "at least 1"),
        (WriteFile(), {"path": "a"}, "`content` is required"),
        (EditFile(), {"path": "a", "old": "", "new": "b"}, "`old` must not be empty"),
        (ListFiles(), {"path": ["."]}, "`path` must be a string, got list"),
        (RunCommand(), {}, "`command` is required"),
        (RunCommand(), {"command": "  "}, "`command` is empty"),
        (RunCommand(), {"command": "true", "timeout": "5"}, "`timeout` must be a number"),
        (RunCommand(), {"command": "true", "timeout": -1}, "positive number"),
    ],
)
async def test_bad_input_is_refused_with_the_field_named(
    tmp_path: Path, tool: Tool, args: dict[str, object], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        await tool.run(args, ctx_for(tmp_path))


# --- staying inside the workspace --------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace next to a secret file, with symlinks pointing out of it."""
    (tmp_path / "secret.txt").write_text("secret")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "inside.txt").write_text("fine")
    (ws / "out_link").symlink_to(tmp_path / "secret.txt")
    (ws / "out_dir").symlink_to(tmp_path)
    (ws / "dangling").symlink_to(tmp_path / "new.txt")
    (ws / "in_link").symlink_to(ws / "inside.txt")
    return ws


@pytest.mark.parametrize(
    "path", ["../secret.txt", "sub/../../secret.txt", "/etc/passwd", "out_link", "out_dir/x"]
)
async def test_paths_that_leave_the_workspace_are_refused(workspace: Path, path: str) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(workspace, path)
    with pytest.raises(ToolError, match="outside the workspace"):
        await ReadFile().run({"path": path}, ctx_for(workspace))
    with pytest.raises(ToolError, match="outside the workspace"):
        await WriteFile().run({"path": path, "content": "pwned"}, ctx_for(workspace))
    assert (workspace.parent / "secret.txt").read_text() == "secret"


async def test_writing_through_a_dangling_symlink_out_is_refused(workspace: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await WriteFile().run({"path": "dangling", "content": "x"}, ctx_for(workspace))
    assert not (workspace.parent / "new.txt").exists()


async def test_paths_inside_the_workspace_are_fine_however_spelled(workspace: Path) -> None:
    inside = real(workspace) / "inside.txt"
    for path in ["inside.txt", "./sub/../inside.txt", str(inside), "in_link"]:
        assert resolve_in_workspace(workspace, path) == inside
    assert resolve_in_workspace(workspace, ".") == real(workspace)
    with pytest.raises(ToolError, match="bad path"):
        resolve_in_workspace(workspace, "a\0b")


# --- commands ----------------------------------------------------------------


async def test_a_command_reports_its_exit_code_and_merged_output(tmp_path: Path) -> None:
    ok = await RunCommand().run({"command": "echo out; echo err >&2; pwd"}, ctx_for(tmp_path))
    assert ok.content == f"exit code 0\nout\nerr\n{real(tmp_path)}\n"
    assert (ok.note, ok.is_error) == ("ran `echo out; echo err >&2; pwd`: exit 0", False)

    failed = await RunCommand().run({"command": "echo nope; exit 3"}, ctx_for(tmp_path))
    assert (failed.content, failed.is_error) == ("exit code 3\nnope\n", True)


async def test_the_note_shows_the_command_on_one_short_line(tmp_path: Path) -> None:
    out = await RunCommand().run({"command": "true\n" + "# pad " * 30}, ctx_for(tmp_path))
    assert out.note.startswith("ran `true # pad") and out.note.endswith("…`: exit 0")
    assert "\n" not in out.note and len(out.note) < 80


async def test_the_note_is_redacted_before_it_is_cut(tmp_path: Path) -> None:
    secret = "fakesigningsecret123456"
    ctx = ctx_for(tmp_path, redactor=Redactor({"SLACK_SIGNING_SECRET": secret}))
    command = f"echo {'A' * 40} {secret}"  # the secret straddles the note's width
    out = await RunCommand().run({"command": command}, ctx)
    assert out.note.startswith("ran `echo AAAA") and out.note.endswith("…`: exit 0")
    assert not any(secret[:n] in out.note for n in range(5, len(secret) + 1))


async def test_long_output_keeps_head_and_tail(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, output_limit=20)
    out = await RunCommand().run({"command": "seq 1 100000"}, ctx)
    total = sum(len(f"{i}\n") for i in range(1, 100_001))
    assert out.content == (
        f"exit code 0\n1\n2\n3\n4\n5\n\n[... {total - 20} characters cut ...]\n99\n100000\n"
        "\n[output capped at 20 characters]"
    )
    assert out.note.endswith("(output capped at 20 characters)")


async def test_a_command_past_its_cpu_cap_is_stopped_and_says_so(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, command_cpu_seconds=1)
    out = await RunCommand().run({"command": "while :; do :; done"}, ctx)
    assert out.is_error
    assert out.content.endswith("[stopped at its CPU time cap of 1 s]")
    child = await RunCommand().run({"command": "sh -c 'while :; do :; done'; echo went on"}, ctx)
    assert "went on" in child.content
    assert "(stopped at its CPU time cap of 1 s)" in child.note


@pytest.mark.usefixtures("working_caps")
async def test_a_command_past_its_memory_cap_is_killed_and_says_so(tmp_path: Path) -> None:
    capped = RunCommand(groups=cast(CommandGroups, command_groups()))
    ctx = ctx_for(tmp_path, command_memory_mb=64)
    grab = "python3 -c 'x = b\"x\" * (256 * 1024 * 1024)'"
    out = await capped.run({"command": grab}, ctx)
    assert out.is_error
    assert out.content.endswith("[a process was killed at its memory cap of 64 MB]")
    small = await capped.run({"command": "python3 -c 'x = b\"x\" * (8 * 1024 * 1024)'"}, ctx)
    assert not small.is_error, small.content


async def test_the_bots_secrets_do_not_reach_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    out = await RunCommand().run({"command": "env"}, ctx_for(tmp_path))
    assert "xoxb-secret" not in out.content
    assert "PATH=" in out.content


async def test_a_timeout_kills_the_shell_and_its_children(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"^command timed out after 0.5 s\nstarted\n") as err:
        await RunCommand().run({"command": SPAWN_AND_WAIT, "timeout": 0.5}, ctx_for(tmp_path))
    assert time.monotonic() - started < 5
    assert "started" in str(err.value)
    shell, child = await wait_for_pids(tmp_path / "pids")
    assert is_reaped(shell)
    assert not is_live(child)


async def test_the_timeout_is_capped_by_the_context(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, command_timeout=0.3)
    with pytest.raises(ToolError, match=re.escape("timed out after 0.3 s")):
        await RunCommand().run({"command": "sleep 600", "timeout": 100}, ctx)


async def test_a_command_ignoring_sigterm_is_killed_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "TERM_GRACE", 0.2)
    stubborn = "trap '' TERM; " + SPAWN_AND_WAIT
    with pytest.raises(ToolError, match="timed out"):
        await RunCommand().run({"command": stubborn, "timeout": 0.3}, ctx_for(tmp_path))
    shell, child = await wait_for_pids(tmp_path / "pids")
    assert is_reaped(shell)
    assert not is_live(child)


async def test_background_processes_do_not_outlive_the_command(tmp_path: Path) -> None:
    detached = "sleep 600 >/dev/null 2>&1 & echo $! > child; echo done"
    out = await RunCommand().run({"command": detached}, ctx_for(tmp_path))
    assert out.content == "exit code 0\ndone\n"
    (child,) = await wait_for_pids(tmp_path / "child")
    assert not is_live(child)


async def test_stop_kills_the_command_and_its_children_before_the_task_ends(
    tmp_path: Path,
) -> None:
    run = RunCommand().run({"command": SPAWN_AND_WAIT}, ctx_for(tmp_path))
    task: asyncio.Task[object] = asyncio.create_task(run)
    shell, child = await wait_for_pids(tmp_path / "pids", task)
    assert is_live(shell) and is_live(child)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert is_reaped(shell)
    assert not is_live(child)


def live_pids_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and is_live(int(proc.name)):
            with contextlib.suppress(OSError):
                if (proc / "cwd").readlink() == directory:
                    found.append(int(proc.name))
    return found


async def test_a_stop_at_any_moment_of_the_start_leaves_nothing_behind(tmp_path: Path) -> None:
    for ticks in range(12):  # cancel during the spawn, just after it, and later
        workspace = tmp_path / str(ticks)
        workspace.mkdir()
        run = RunCommand().run({"command": "sleep 600 & sleep 600 & wait"}, ctx_for(workspace))
        task = asyncio.create_task(run)
        for _ in range(ticks):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert live_pids_in(real(workspace)) == []


async def test_a_command_that_cannot_start_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot start"):
        await RunCommand().run({"command": "true"}, ctx_for(tmp_path / "missing"))


def test_the_tools_fit_in_one_toolbox() -> None:
    tools: list[Tool] = [ListFiles(), ReadFile(), WriteFile(), EditFile(), RunCommand()]
    box = Toolbox(tools)
    assert [t.spec.name for t in box.select(["read_only"])] == ["list_files", "read_file"]
    for tool in tools:
        schema = tool.spec.input_schema
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])


async def test_a_pipe_in_the_workspace_is_refused_at_once_by_the_file_tools(
    tmp_path: Path,
) -> None:
    os.mkfifo(tmp_path / "fifo")  # what a command can leave behind, to block the bot
    ctx = ctx_for(tmp_path)
    for tool, args in (
        (ReadFile(), {"path": "fifo"}),
        (WriteFile(), {"path": "fifo", "content": "x"}),
        (EditFile(), {"path": "fifo", "old": "a", "new": "b"}),
    ):
        with pytest.raises(ToolError, match="not a regular file"):
            await asyncio.wait_for(tool.run(args, ctx), 2.0)
