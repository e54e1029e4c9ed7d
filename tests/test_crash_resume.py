"""Crash and resume with a real bot process, killed with SIGKILL at the injected points.

Each test runs ``python -m bot console`` on one SQLite database with a model
script file (the script goes on from the history, so a restarted process picks up
where the dead one was), kills it where it hurts (``THREADBOT_FAULT``, or SIGKILL
from the test), starts a new process on the same database, and checks that no
side effect ran twice and nothing was lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.console_process import Bot, command, finish, plan

ROOT = Path(__file__).resolve().parents[1]


THREE_TOOLS = [
    plan("Append three lines"),
    {"calls": [command("echo T1 >> log"), command("echo T2 >> log"), command("echo T3 >> log")]},
    finish("Three lines written."),
]


def test_crash_between_tools_resumes_without_running_a_tool_twice(tmp_path: Path) -> None:
    bot = Bot(tmp_path, THREE_TOOLS)

    first = bot.run("append three lines\n+✅ 2\n", fault="after_tool_result:2")
    assert first.returncode == -signal.SIGKILL
    assert (bot.workspace() / "log").read_text() == "T1\nT2\n"
    assert bot.query("select lifecycle from conversations") == [("running",)]

    second = bot.run()
    assert second.returncode == 0, second.stderr
    assert (bot.workspace() / "log").read_text() == "T1\nT2\nT3\n"
    assert "✅ Three lines written." in second.stdout
    assert bot.query("select lifecycle from conversations") == [("done",)]
    states = bot.query("select name, state from tool_calls where name = 'run_command'")
    assert states == [("run_command", "done")] * 3
    results = bot.query("select count(*) from journal where kind = 'tool_result'")
    assert results == [(5,)]  # propose_plan, three commands, finish: one result each


def test_crash_after_the_model_response_runs_its_tools_once(tmp_path: Path) -> None:
    bot = Bot(tmp_path, THREE_TOOLS)

    first = bot.run("append three lines\n+✅ 2\n", fault="after_model_response:2")
    assert first.returncode == -signal.SIGKILL
    assert not (bot.workspace() / "log").exists()

    second = bot.run()
    assert second.returncode == 0, second.stderr
    assert (bot.workspace() / "log").read_text() == "T1\nT2\nT3\n"
    assert bot.query("select lifecycle from conversations") == [("done",)]


def test_a_mutating_call_found_running_after_a_crash_becomes_unknown(tmp_path: Path) -> None:
    bot = Bot(
        tmp_path,
        [
            plan("Run a long job"),
            {"calls": [command("echo $$ > started; echo once >> log; sleep 20")]},
            finish("Checked first."),
        ],
    )
    proc = bot.start("run the job\n+✅ 2\n")
    try:
        bot.wait_until("select 1 from tool_calls where name='run_command' and state='running'")
        workspace = bot.workspace()
        deadline = time.monotonic() + 10
        while not (workspace / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    ((leftover,),) = bot.query("select process_group from tool_calls where name='run_command'")
    with contextlib.suppress(ProcessLookupError):  # sandboxed, it died with the bot already
        os.killpg(leftover, signal.SIGKILL)

    second = bot.run()
    assert second.returncode == 0, second.stderr
    assert (workspace / "log").read_text() == "once\n"
    assert bot.query("select state from tool_calls where name='run_command'") == [("unknown",)]
    (result,) = bot.query(
        "select body from journal where kind='tool_result' and body like '%unknown%'"
    )[0]
    assert "Check the state of the workspace before retrying" in json.loads(result)["content"]
    assert "✅ Checked first." in second.stdout


def test_a_crash_before_a_decision_resumes_still_waiting_for_it(tmp_path: Path) -> None:
    bot = Bot(
        tmp_path,
        [
            plan("Clean the build"),
            {"calls": [command("rm -rf build; touch cleaned")]},
            finish("Clean."),
        ],
    )
    proc = bot.start("clean the build\n+✅ 2\n")
    try:
        bot.wait_until("select 1 from conversations where wait_kind = 'tool_approval'")
        bot.wait_until(
            "select 1 from outbox o join pending_requests p on o.request_id = p.id "
            "where p.kind = 'tool_approval' and o.state = 'sent'"
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        proc.kill()

    restarted = bot.run()
    assert restarted.returncode == 0, restarted.stderr
    assert not (bot.workspace() / "cleaned").exists()
    assert bot.query("select lifecycle, wait_kind from conversations") == [
        ("waiting", "tool_approval")
    ]

    ((approval,),) = bot.query(
        "select o.platform_message_id from outbox o join pending_requests p on o.request_id = p.id "
        "where p.kind = 'tool_approval'"
    )
    decided = bot.run(f"+✅ {approval}.1\n")
    assert decided.returncode == 0, decided.stderr
    assert (bot.workspace() / "cleaned").exists()
    assert "✅ Clean." in decided.stdout
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("done",)]


def test_a_crash_after_the_platform_accepted_a_message_posts_no_second_one(tmp_path: Path) -> None:
    bot = Bot(tmp_path, [plan("Say hello"), finish("Hello!")])

    first = bot.run("say hello\n", fault="after_platform_accept:1")
    assert first.returncode == -signal.SIGKILL
    assert first.stdout.count("📋 Plan (v1)") == 1
    assert bot.query("select state from outbox") == [("pending",)]

    second = bot.run("+✅ 2\n")
    assert second.returncode == 0, second.stderr
    assert "threadbot: 📋 Plan (v1)" not in second.stdout  # the redelivery was recognised
    assert "[2] ↳1 threadbot (edited): ✅ Approved by" in second.stdout  # edited, not reposted
    assert bot.query(
        "select purpose, platform_message_id from outbox where request_id is not null"
    ) == [("milestone", "2"), ("closed", "2")]
    assert "✅ Hello!" in second.stdout  # and the approval found the plan message


@pytest.mark.parametrize(
    "point", ["after_tool_result", "after_model_response", "after_platform_accept"]
)
def test_every_documented_fault_point_kills_the_process(tmp_path: Path, point: str) -> None:
    bot = Bot(tmp_path, THREE_TOOLS)
    result = bot.run("append three lines\n+✅ 2\n", fault=point)
    assert result.returncode == -signal.SIGKILL


def test_an_unknown_fault_point_is_a_settings_error(tmp_path: Path) -> None:
    result = Bot(tmp_path, THREE_TOOLS).run("hi\n", fault="after_lunch")
    assert result.returncode == 2
    assert "unknown fault point 'after_lunch'" in result.stderr


def test_a_note_sent_while_a_command_runs_survives_a_crash(tmp_path: Path) -> None:
    bot = Bot(
        tmp_path,
        [
            plan("Run a long job"),
            {"calls": [command("echo $$ > started; sleep 20")]},
            finish("Noted your message."),
        ],
    )
    proc = bot.start("run the job\n", wait="no")
    try:
        bot.wait_until("select 1 from outbox where request_id is not null and state = 'sent'")
        assert proc.stdin is not None
        proc.stdin.write("+✅ 2\n")
        proc.stdin.flush()
        bot.wait_until(  # its process started (a kill before that leaves nothing running)
            "select 1 from tool_calls where name='run_command' and state='running' "
            "and process_group is not null"
        )
        proc.stdin.write(">1 please also check the logs\n")
        proc.stdin.flush()
        bot.wait_until("select 1 from deliveries where event is not null and handled_at is null")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    workspace = bot.workspace()
    deadline = time.monotonic() + 60  # the command outlives the bot: it writes its pid
    while not (workspace / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(int((workspace / "started").read_text()), signal.SIGKILL)

    second = bot.run()
    assert second.returncode == 0, second.stderr
    notes = bot.query("select body from journal where kind = 'user_text'")
    assert any("please also check the logs" in body for (body,) in notes)
    assert bot.query(
        "select count(*) from deliveries where handled_at is null and event is not null"
    ) == [(0,)]
    assert "✅ Noted your message." in second.stdout
