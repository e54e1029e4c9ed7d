"""A command's process group that outlived a killed bot is killed when its run resumes.

A real bot process (the console) runs a long command and is killed with SIGKILL.
Sandboxed (the default where bubblewrap works), the command dies with the bot
(``--die-with-parent`` and its PID namespace). Without the sandbox (a bwrap that
cannot run: every command asks first, and runs as ``nobody`` for a root bot) the
command's group keeps running; the next start finds the call ``running``, kills
the group it recorded (its id, its leader's start time, the boot id), and tells
the model the outcome is unknown. A group whose id was reused by another process
(same id, another start time) is left alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from core.tools.processes import group_alive, start_time
from tests.console_process import Bot, command, finish, plan

LONG = [
    plan("Run the long job"),
    {"calls": [command("echo $$ > pid; sleep 60; touch late")]},
    finish("The job's outcome is unknown; I checked the workspace."),
]


NO_SANDBOX = {"THREADBOT_BWRAP": "/nonexistent/bwrap"}
"""A bwrap that cannot run: the fallback, where a command asks first and is not confined."""


def killed_while_the_command_runs(bot: Bot) -> int:
    """Start the bot, approve the plan (and, without the sandbox, the command), wait for
    the command, SIGKILL the bot; the command's process group."""
    approve = "+✅ 2\n+✅ 3\n" if bot.extra_env == NO_SANDBOX else "+✅ 2\n"
    proc = bot.start(f"run the long job\n{approve}")
    try:
        bot.wait_until("select 1 from tool_calls where process_group is not null")
        (pid,) = bot.query("select process_group from tool_calls where process_group is not null")[
            0
        ]
    finally:
        proc.kill()
        proc.wait(timeout=20)
    return pid


def wait_gone(pgid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not group_alive(pgid)


def test_a_sandboxed_command_dies_with_a_killed_bot(tmp_path: Path) -> None:
    bot = Bot(tmp_path, LONG)
    pid = killed_while_the_command_runs(bot)
    assert wait_gone(pid)  # bwrap and everything in its PID namespace died with the bot

    again = bot.run()

    assert again.returncode == 0, again.stderr
    assert not (bot.workspace() / "late").exists()
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("unknown",)]
    assert "The job's outcome is unknown" in again.stdout


def test_a_group_left_running_by_a_killed_bot_is_killed_at_resume(tmp_path: Path) -> None:
    bot = Bot(tmp_path, LONG, NO_SANDBOX)
    pid = killed_while_the_command_runs(bot)
    assert group_alive(pid)  # the bot died; its command did not
    assert bot.query(
        "select process_group, process_started from tool_calls where name = 'run_command'"
    ) == [(pid, start_time(pid))]

    again = bot.run()

    assert again.returncode == 0, again.stderr
    assert wait_gone(pid)
    assert not (bot.workspace() / "late").exists()
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("unknown",)]
    assert "The job's outcome is unknown" in again.stdout


def test_a_reused_group_id_is_never_killed(tmp_path: Path) -> None:
    bot = Bot(tmp_path, LONG, NO_SANDBOX)
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
