"""No file a command made setuid or setgid keeps that bit on the host (issue 22).

``cp /usr/bin/id myid; chmod 4755 myid`` in the sandbox would leave a working
setuid binary of the command's user in the workspace for any local user to run.
After every command, however it ended (done, failed, timed out, stopped), no file
or folder of the workspace keeps a setuid or setgid bit, and a symbolic link is
never followed to a file outside. The folder of every workspace is the bot's alone
(0700); where a root bot without a sandbox runs commands as ``nobody``, that
user's group may pass through it (0710), so its commands still reach their
workspace.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from bot.app import build
from bot.sandboxing import NOBODY, confine
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.tools.base import ToolContext
from core.tools.command import RunCommand
from core.vocabulary.entries import ToolResultEntry
from core.vocabulary.errors import ToolError
from tests.conftest import wait_for
from tests.harness import Chat

PLANT = (
    "cp /usr/bin/id myid && chmod 4755 myid && mkdir -p d && cp /usr/bin/id d/gid && "
    "chmod 2755 d/gid && chmod g+s d && touch planted"
)
SETID = stat.S_ISUID | stat.S_ISGID


@pytest.fixture
def sandboxed(working_bwrap: None) -> RunCommand:
    return confine("bwrap").run_command


def setid_left(workspace: Path) -> list[str]:
    """The entries under ``workspace`` with a setuid or setgid bit (links not followed)."""
    found = []
    for folder, subdirs, files in os.walk(workspace):
        for name in (*subdirs, *files):
            path = Path(folder) / name
            if not path.is_symlink() and path.lstat().st_mode & SETID:
                found.append(str(path.relative_to(workspace)))
    return found


async def ended(tool: RunCommand, how: str, ctx: ToolContext) -> None:
    """Run :data:`PLANT` in ``ctx.workspace`` and end the command ``how``."""
    if how == "done":
        await tool.run({"command": PLANT}, ctx)
    elif how == "failed":
        await tool.run({"command": f"{PLANT}; exit 3"}, ctx)
    elif how == "timed out":
        with pytest.raises(ToolError, match="timed out"):
            await tool.run({"command": f"{PLANT}; sleep 600", "timeout": 5}, ctx)
    else:
        call = asyncio.create_task(tool.run({"command": f"{PLANT}; sleep 600"}, ctx))
        await wait_for(lambda: (ctx.workspace / "planted").exists() or call.done())
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call


@pytest.mark.parametrize("how", ["done", "failed", "timed out", "stopped"])
async def test_no_setuid_or_setgid_bit_outlives_the_command(
    sandboxed: RunCommand, tmp_path: Path, how: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    keep = outside / "keep"
    keep.write_bytes(b"")
    keep.chmod(0o4755)  # a setuid file the workspace only links to
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link").symlink_to(keep)

    await ended(sandboxed, how, ToolContext(workspace=workspace))

    assert (workspace / "planted").exists()  # the command did plant them
    assert setid_left(workspace) == []
    assert stat.S_IMODE((workspace / "myid").stat().st_mode) == 0o755
    assert stat.S_IMODE((workspace / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE(keep.stat().st_mode) == 0o4755  # the link was not followed


async def test_the_workspace_root_is_the_bot_s_alone(settings: Settings) -> None:
    settings.workspace_root.mkdir(mode=0o755)
    async with await build(settings, model=ScriptedModel([])):
        mode = stat.S_IMODE(settings.workspace_root.stat().st_mode)
    assert mode == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root bot runs commands as nobody")
async def test_a_root_bot_without_a_sandbox_lets_nobody_reach_its_workspace_only(
    settings: Settings,
) -> None:
    settings.bwrap = "/nonexistent/bwrap"
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["write a note"]})]),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": "id -u > note"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Done."})]),
        ]
    )
    async with await build(settings, model=model) as app:
        root = settings.workspace_root.stat()
        chat = Chat(app)
        await chat.mention("write a note")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        await chat.react(chat.bot_message("May I run"))  # every command asks here
        await app.hub.settled()
        snap = await chat.snapshot()

    assert (stat.S_IMODE(root.st_mode), root.st_gid) == (0o710, NOBODY[1])
    results = [r.entry for r in snap.journal if isinstance(r.entry, ToolResultEntry)]
    assert any(r.content == "exit code 0\n" for r in results), results
    assert (Path(snap.workspace) / "note").read_text() == f"{NOBODY[0]}\n"
