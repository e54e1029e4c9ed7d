"""A command's memory and processes are capped together, whatever it forks (issue 22).

Each command runs in a cgroup of its own (:mod:`core.tools.cgroups`), entered by its
first process before it runs anything. The fork bomb and the memory hog run for real,
in the sandbox, under the DEFAULT caps (2,048 MB, 256 processes): the kernel's own
counters say the cap was hit, and the tool result says it. Lower caps of their own
show the same in less time. Which mechanism is chosen (cgroup v2, v1, none) is tested
on fake cgroup roots: folders shaped as ``/sys/fs/cgroup`` is. Without a mechanism
every command asks a person first.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app import build
from bot.sandboxing import command_groups, confine
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.settings import EngineSettings
from core.tools.base import ToolContext
from core.tools.cgroups import CommandGroups, Group, find, find_group
from core.tools.command import RunCommand
from core.tools.sandbox import DEFAULT_ENV
from core.vocabulary.entries import ToolResultEntry
from core.vocabulary.errors import ToolError
from core.vocabulary.tool_records import CommandProcess, ToolState
from tests.harness import Chat
from tests.process_harness import live_with, sleep_marker

HOG = """\
import os, select, sys
n, size = int(sys.argv[1]), int(sys.argv[2]) * 2**20
ready_r, ready_w = os.pipe()
hold_r, hold_w = os.pipe()
for _ in range(n):
    if os.fork() == 0:
        os.close(ready_r); os.close(hold_w)
        block = b"x" * size
        os.write(ready_w, b"+")
        os.read(hold_r, 1)
        os._exit(0)
os.close(ready_w); os.close(hold_r)
held = 0
while held < n and not os.waitpid(-1, os.WNOHANG)[0]:
    if select.select([ready_r], [], [], 0.05)[0]:
        held += len(os.read(ready_r, n))
print(f"held {held} of {n}", flush=True)
"""
"""``python3 hog.py N MB``: N children each fill MB megabytes and hold them until all N
hold theirs (or one died); prints how many held theirs at once."""


@pytest.fixture
def sandboxed(working_bwrap: None) -> RunCommand:
    confinement = confine("bwrap")
    assert confinement.run_command.groups is not None and not confinement.every_command_asks
    if shutil.which("python3", path=DEFAULT_ENV["PATH"]) is None:
        pytest.skip("no python3 inside the sandbox")
    return confinement.run_command


@pytest.fixture
def groups(working_caps: None) -> CommandGroups:
    found = command_groups()
    assert isinstance(found, CommandGroups)
    return found


@pytest.fixture
def counting(request: pytest.FixtureRequest) -> Iterator[list[int]]:
    """Counts, every few ms, the live processes with the test's marker (its param);
    the list of counts seen."""
    marker: str = request.param
    seen: list[int] = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.wait(0.005):
            seen.append(len(live_with(marker)))

    thread = threading.Thread(target=count, daemon=True)
    thread.start()
    yield seen
    stop.set()
    thread.join()


FORK_BOMB = sleep_marker()


@pytest.mark.usefixtures("working_bwrap")
@pytest.mark.parametrize("counting", [FORK_BOMB], indirect=True, ids=["its marker"])
async def test_a_fork_bomb_stops_at_the_default_256_processes_and_the_result_says_so(
    settings: Settings, counting: list[int]
) -> None:
    assert (settings.command_processes, settings.command_memory_mb) == (256, 2048)
    bomb = f"for i in $(seq 400); do sleep {FORK_BOMB} & done; wait"
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Start 400 sleeps"]})]),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": bomb})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Done."})]),
        ]
    )
    async with await build(settings, model=model) as app:
        chat = Chat(app)
        await chat.mention("start 400 sleeps")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        snap = await chat.snapshot()

    (call,) = [r for r in snap.tool_calls.values() if r.name == "run_command"]
    (result,) = [
        r.entry
        for r in snap.journal
        if isinstance(r.entry, ToolResultEntry) and r.entry.tool_use_id == call.tool_use_id
    ]
    assert result.is_error and "Cannot fork" in result.content
    assert result.content.endswith("[a process could not start at its cap of 256 processes]")
    assert "(a process could not start at its cap of 256 processes)" in chat.out.getvalue()
    assert 0 < max(counting) <= 256  # sleeps ran, never more than the cap at once
    assert not live_with(FORK_BOMB)  # and none outlived the command


async def test_processes_past_the_default_2048_mb_together_are_stopped_at_the_cap(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    defaults = EngineSettings()
    ctx = ToolContext(
        workspace=tmp_path,
        command_memory_mb=defaults.command_memory_mb,
        command_processes=defaults.command_processes,
    )
    assert ctx.command_memory_mb == 2048
    (tmp_path / "hog.py").write_text(HOG)

    out = await sandboxed.run({"command": "python3 hog.py 4 600"}, ctx)  # 2,400 MB together

    held = int(out.content.split("held ")[1].split()[0])
    assert held < 4, out.content  # each of 600 MB is far below the cap; all four are not
    assert out.content.endswith("[a process was killed at its memory cap of 2048 MB]")


async def test_a_low_cap_of_its_own_counts_every_process_of_the_command(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    ctx = ToolContext(workspace=tmp_path, command_memory_mb=64, command_processes=16)
    (tmp_path / "hog.py").write_text(HOG)

    alone = await sandboxed.run({"command": "python3 hog.py 1 30"}, ctx)
    together = await sandboxed.run({"command": "python3 hog.py 3 30"}, ctx)  # 90 MB
    forks = await sandboxed.run({"command": "for i in $(seq 30); do sleep 5 & done; wait"}, ctx)

    assert alone.content == "exit code 0\nheld 1 of 1\n"
    assert "held 3 of 3" not in together.content
    assert together.content.endswith("[a process was killed at its memory cap of 64 MB]")
    assert forks.content.endswith("[a process could not start at its cap of 16 processes]")


async def test_the_command_is_in_its_group_from_its_first_instruction_and_it_goes_after(
    groups: CommandGroups, tmp_path: Path
) -> None:
    recorded: list[CommandProcess] = []

    async def started(process: CommandProcess) -> None:
        recorded.append(process)

    ctx = ToolContext(workspace=tmp_path, command_processes=64, started=started)
    out = await RunCommand(groups=groups).run({"command": "cat /proc/$$/cgroup"}, ctx)

    (process,) = recorded
    assert process.cgroup is not None and process.cgroup.startswith("threadbot-")
    lines = out.content.splitlines()[1:]
    for controller in ("pids", "memory") if groups.version == 1 else ("",):
        (line,) = [x for x in lines if x.split(":")[1] == controller]
        assert line.endswith(f"/{process.cgroup}")  # the shell was born in it
    assert find_group(process.cgroup) is None  # removed once its processes were gone


async def test_without_a_cgroup_every_command_asks_first_and_the_bot_says_why(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings.cgroup_root = tmp_path / "no-cgroups"
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["list the files"]})]),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": "ls"})]),
        ]
    )
    with caplog.at_level(logging.WARNING):
        app = await build(settings, model=model)
    assert "commands cannot be capped here" in caplog.text
    async with app:
        chat = Chat(app)
        await chat.mention("list the files")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        snap = await chat.snapshot()
    (record,) = [r for r in snap.tool_calls.values() if r.name == "run_command"]
    assert record.state is ToolState.PENDING_APPROVAL
    assert "every command asks first" in chat.out.getvalue()


# --- which mechanism: fake cgroup roots ---------------------------------------------------


def cgroup(folder: Path, **files: str) -> Path:
    """A fake cgroup folder with these control files (``cgroup.procs`` always)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.procs").write_text("")
    for name, text in files.items():
        (folder / name.replace("__", ".")).write_text(text)
    return folder


def test_cgroup_v2_is_used_where_the_bot_s_own_group_delegates_memory_and_pids(
    tmp_path: Path,
) -> None:
    root = cgroup(tmp_path, cgroup__controllers="cpu memory pids")
    own = cgroup(
        root / "bot",
        cgroup__controllers="memory pids",
        cgroup__subtree_control="memory pids",
    )

    found = find(root, "0::/bot\n")

    assert found == CommandGroups(2, (own,))
    group = found.create(memory_mb=2048, processes=256)
    assert group.dirs == (own / group.name,)
    assert (own / group.name / "memory.max").read_text() == str(2048 * 2**20)
    assert (own / group.name / "pids.max").read_text() == "256"
    assert group.hits(memory_mb=2048, processes=256) == []
    (own / group.name / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
    (own / group.name / "pids.events").write_text("max 3\n")
    assert group.hits(memory_mb=2048, processes=256) == [
        "a process was killed at its memory cap of 2048 MB",
        "a process could not start at its cap of 256 processes",
    ]


def test_cgroup_v2_uses_the_parent_of_a_delegated_subgroup_enabling_its_controllers(
    tmp_path: Path,
) -> None:
    root = cgroup(tmp_path / "sys", cgroup__controllers="memory pids")
    unit = cgroup(
        root / "threadbot.service",
        cgroup__controllers="cpu memory pids",
        cgroup__subtree_control="",  # offered, not yet enabled for children
    )
    cgroup(unit / "bot", cgroup__controllers="", cgroup__subtree_control="")

    found = find(root, "0::/threadbot.service/bot\n")

    assert found == CommandGroups(2, (unit,))
    assert (unit / "cgroup.subtree_control").read_text() == "+memory +pids"


def test_cgroup_v1_memory_and_pids_are_used_under_the_bot_s_own_groups(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    cgroup(root / "unified", cgroup__controllers="", cgroup__subtree_control="")  # hybrid
    memory = cgroup(cgroup(root / "memory") / "session" / "7")
    pids = cgroup(root / "pids")

    found = find(root, "8:pids:/\n4:memory:/session/7\n0::/\n")

    assert found == CommandGroups(1, (memory, pids))
    group = found.create(memory_mb=64, processes=16)
    assert (memory / group.name / "memory.limit_in_bytes").read_text() == str(64 * 2**20)
    assert (pids / group.name / "pids.max").read_text() == "16"
    (memory / group.name / "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
    )
    (pids / group.name / "pids.events").write_text("max 0\n")
    assert group.hits(memory_mb=64, processes=16) == [
        "a process was killed at its memory cap of 64 MB"
    ]
    assert find_group(group.name, root) == Group(
        group.name, (memory / group.name, pids / group.name), 1
    )


def test_no_mechanism_is_said_in_words(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    cgroup(root / "unified", cgroup__controllers="cpu io", cgroup__subtree_control="")
    cgroup(root / "memory")  # no pids hierarchy

    found = find(root, "4:memory:/\n0::/\n")

    assert found == (
        "no cgroup the bot may create command groups in: cgroup v2 "
        f"({root / 'unified'}) offers no memory and pids controllers to the bot's group or "
        f"its parent, and no writable cgroup v1 memory and pids hierarchies are under {root}"
    )


async def test_a_group_that_cannot_be_made_fails_the_call_and_runs_nothing(
    tmp_path: Path,
) -> None:
    gone = CommandGroups(1, (tmp_path / "missing-memory", tmp_path / "missing-pids"))
    (tmp_path / "ws").mkdir()
    ctx = ToolContext(workspace=tmp_path / "ws")
    with pytest.raises(ToolError, match="cannot cap the command's memory and processes"):
        await RunCommand(groups=gone).run({"command": "touch ran"}, ctx)
    assert not (tmp_path / "ws" / "ran").exists()


def test_empty_groups_left_by_a_dead_bot_are_swept_and_busy_ones_kept(
    groups: CommandGroups,
) -> None:
    # A private parent of the test's own, so no other test's group is ever swept.
    parents = tuple(parent / f"sweep-test-{secrets.token_hex(4)}" for parent in groups.parents)
    for parent in parents:
        parent.mkdir()
    here = CommandGroups(groups.version, parents)
    left, busy = here.create(memory_mb=64, processes=8), here.create(memory_mb=64, processes=8)
    sleeper = subprocess.Popen(
        [
            "/bin/sh",
            "-c",
            'for f; do echo $$ > "$f"; done; exec sleep 60',
            "sh",
            *map(str, busy.procs),
        ]
    )
    try:
        wait_until = time.monotonic() + 10
        while not busy.members() and time.monotonic() < wait_until:
            time.sleep(0.01)
        assert busy.members() == {sleeper.pid}

        assert here.sweep(older_than=3600) == 0  # both too fresh
        assert here.sweep(older_than=0) == 1

        assert all(not folder.exists() for folder in left.dirs)
        assert all(folder.exists() for folder in busy.dirs)
    finally:
        sleeper.kill()
        sleeper.wait()
        while busy.members():
            time.sleep(0.01)
        busy.remove()
        for parent in parents:
            parent.rmdir()
