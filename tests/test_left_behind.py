"""A command's process group that outlived a killed bot is killed when its run resumes.

A real bot process (the console) runs a long command and is killed with SIGKILL.
Sandboxed (the default where bubblewrap works), the command dies with the bot
(``--die-with-parent`` and its PID namespace). Without the sandbox (a bwrap that
cannot run: every command asks first, and runs as ``nobody`` for a root bot) the
command's group keeps running; the next start finds the call ``running``, kills
the group it recorded (its id, its leader's start time, the boot id), and tells
the model the outcome is unknown. A group whose id was reused by another process
(same id, another start time) is left alone.

Each command has its own cgroup, recorded with it: a group whose leader has exited
is still emptied at resume, whatever its processes. A bot killed before the record
is written never lets the command run. Each test's command sleeps for a number of
seconds no other test uses, and is checked gone by that marker.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.tools.cgroups import find_group
from core.tools.processes import group_alive, start_time
from tests.console_process import ROOT, Bot, command, finish, plan
from tests.process_harness import live_with, sleep_marker


def long_job(marker: str) -> list[dict]:
    return [
        plan("Run the long job"),
        {"calls": [command(f"echo $$ > pid; sleep {marker}; touch late")]},
        finish("The job's outcome is unknown; I checked the workspace."),
    ]


NO_SANDBOX = {"THREADBOT_BWRAP": "/nonexistent/bwrap"}
"""A bwrap that cannot run: the fallback, where a command asks first and is not confined."""


def killed_while_the_command_runs(bot: Bot) -> int:
    """Start the bot, approve the plan (and, without the sandbox, the command), wait for
    the command to run (recorded, then its shell wrote its pid), SIGKILL the bot; the
    command's process group."""
    approve = "+✅ 2\n+✅ 3\n" if bot.extra_env == NO_SANDBOX else "+✅ 2\n"
    proc = bot.start(f"run the long job\n{approve}")
    try:
        bot.wait_until("select 1 from tool_calls where process_group is not null")
        (pid,) = bot.query("select process_group from tool_calls where process_group is not null")[
            0
        ]
        written = bot.workspace() / "pid"
        deadline = time.monotonic() + 20
        while not (written.exists() and written.read_text().strip()):
            assert time.monotonic() < deadline, "the command never ran"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=120)
    return pid


def wait_gone(pgid: int, seconds: float = 10, marker: str = "") -> bool:
    """Whether group ``pgid`` (and every process with ``marker``) is gone within ``seconds``."""

    def alive() -> bool:
        return group_alive(pgid) or bool(marker and live_with(marker))

    deadline = time.monotonic() + seconds
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive()


@pytest.mark.usefixtures("working_bwrap")
def test_a_sandboxed_command_dies_with_a_killed_bot(tmp_path: Path) -> None:
    marker = sleep_marker()
    bot = Bot(tmp_path, long_job(marker))
    pid = killed_while_the_command_runs(bot)
    assert live_with(marker) or not group_alive(pid)  # its sleep ran, or all is gone already
    assert wait_gone(pid, marker=marker)  # bwrap and its PID namespace died with the bot

    again = bot.run()

    assert again.returncode == 0, again.stderr
    assert not (bot.workspace() / "late").exists()
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("unknown",)]
    assert "The job's outcome is unknown" in again.stdout


@pytest.mark.usefixtures("working_bwrap")
def test_a_setuid_file_made_by_the_command_of_a_killed_bot_loses_its_bit_at_resume(
    tmp_path: Path,
) -> None:
    marker = sleep_marker()
    plant = "cp /usr/bin/id myid && chmod 4755 myid && "
    script = long_job(marker)
    script[1] = {"calls": [command(f"{plant}echo $$ > pid; sleep {marker}; touch late")]}
    bot = Bot(tmp_path, script)
    killed_while_the_command_runs(bot)
    planted = bot.workspace() / "myid"
    assert planted.stat().st_mode & stat.S_ISUID  # the bot died before it could clear it

    again = bot.run()

    assert again.returncode == 0, again.stderr
    assert not planted.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("unknown",)]


def test_a_group_left_running_by_a_killed_bot_is_killed_at_resume(tmp_path: Path) -> None:
    marker = sleep_marker()
    bot = Bot(tmp_path, long_job(marker), NO_SANDBOX)
    pid = killed_while_the_command_runs(bot)
    assert group_alive(pid)  # the bot died; its command did not
    assert bot.query(
        "select process_group, process_started from tool_calls where name = 'run_command'"
    ) == [(pid, start_time(pid))]

    again = bot.run()

    assert again.returncode == 0, again.stderr
    assert wait_gone(pid, marker=marker)
    assert not (bot.workspace() / "late").exists()
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("unknown",)]
    assert "The job's outcome is unknown" in again.stdout


@pytest.mark.usefixtures("working_caps")
def test_a_left_over_group_whose_leader_exited_is_emptied_at_resume(tmp_path: Path) -> None:
    marker = sleep_marker()
    bot = Bot(tmp_path, long_job(marker), NO_SANDBOX)
    pid = killed_while_the_command_runs(bot)
    ((cgroup,),) = bot.query("select process_cgroup from tool_calls where name = 'run_command'")
    os.kill(pid, signal.SIGKILL)  # the leader (the command's shell) exits ...
    deadline = time.monotonic() + 10
    while start_time(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert start_time(pid) is None
    assert live_with(marker) and find_group(cgroup) is not None  # ... its sleep lives on

    again = bot.run()

    assert again.returncode == 0, again.stderr
    assert wait_gone(pid, marker=marker)
    assert find_group(cgroup) is None  # emptied and removed
    assert not (bot.workspace() / "late").exists()
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("unknown",)]


CRASH_BEFORE_THE_RECORD = """\
import asyncio, os, signal, sys
from pathlib import Path
from bot.sandboxing import confine
from core.tools.base import ToolContext

async def started(process):
    print(process.group, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # the bot dies before the record is written

tool = confine("bwrap").run_command
ctx = ToolContext(workspace=Path(sys.argv[2]), started=started)
asyncio.run(tool.run({"command": sys.argv[1]}, ctx))
"""


@pytest.mark.usefixtures("working_bwrap")
def test_a_bot_killed_before_the_command_is_recorded_never_lets_it_run(tmp_path: Path) -> None:
    marker = sleep_marker()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", CRASH_BEFORE_THE_RECORD, f"touch ran; sleep {marker}", workspace],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    shim = int(done.stdout)

    assert wait_gone(shim, marker=marker)
    assert not (workspace / "ran").exists()


def test_a_reused_group_id_is_never_killed(tmp_path: Path) -> None:
    bot = Bot(tmp_path, long_job(sleep_marker()), NO_SANDBOX)
    pid = killed_while_the_command_runs(bot)
    os.killpg(pid, signal.SIGKILL)
    assert wait_gone(pid)
    # Another process now has a group of its own; the record names it by its id but
    # with the start time of the command that ran before (a reused id).
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started = start_time(stranger.pid)
        assert started is not None
        with bot.connect() as db:
            db.execute(
                "update tool_calls set process_group = ?, process_started = ?"
                " where name = 'run_command'",
                (stranger.pid, started - 1),
            )

        again = bot.run()

        assert again.returncode == 0, again.stderr
        assert stranger.poll() is None and group_alive(stranger.pid)
        assert bot.query("select state from tool_calls where name = 'run_command'") == [
            ("unknown",)
        ]
    finally:
        stranger.kill()
        stranger.wait()
