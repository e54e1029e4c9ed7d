"""One console conversation, run straight and killed at every fault point, ends the same.

The conversation (plan, approval, a question, five tool calls, answer) runs once in
one ``python -m bot console`` process, and then once per fault point and count it
reaches (``after_model_response:K``, ``after_tool_result:K``, ``core/faults.py``):
killed there with SIGKILL, restarted on the same database and console state, given
what it still waits for (the approval, the answer), until it is done
(docs/architecture.md, "Durability and exactly-once"). Every run ends with the same
thread text (times aside), the same workspace files, and each command's side
effect once: the commands append a line each to one file.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from tests.console_process import Bot, command, finish, plan

SCRIPT = [
    plan("Write the log", "Ask for the colour", "Write the report"),
    {"text": "Starting.", "calls": [command("echo one >> log"), command("echo two >> log")]},
    {"calls": [{"name": "ask_user", "input": {"question": "Which colour?"}}]},
    {
        "calls": [
            command("echo three >> log"),
            {"name": "write_file", "input": {"path": "report.md", "content": "colour: blue\n"}},
            {"name": "read_file", "input": {"path": "report.md"}},
        ]
    },
    finish("The log has three lines; the report says blue."),
]
TURNS_WITH_CALLS = 5
"""``after_model_response`` is reached once per committed turn with tool calls."""
TOOL_RESULTS = 5
"""``after_tool_result`` is reached once per tool call run (control calls are not run)."""
FAULTS = [f"after_model_response:{k}" for k in range(1, TURNS_WITH_CALLS + 1)] + [
    f"after_tool_result:{k}" for k in range(1, TOOL_RESULTS + 1)
]
INPUT = "write the log and the report\n+✅ 2\n>1 blue\n"
TIMES = re.compile(r"\b(\d+m )?\d+s\b")


def thread_text(bot: Bot) -> list[str]:
    """What the thread shows: the people's words in the order they were journaled, then
    the bot's messages and edits in the order they were written to the outbox (the
    order they are delivered in), with durations replaced (the answer's footer says
    how long it took)."""
    bodies = [json.loads(b) for (b,) in bot.query("select body from journal order by seq")]
    said = [f"{b['author']['name']}: {b['text']}" for b in bodies if b["kind"] == "user_text"]
    posted = [
        f"{purpose}: {TIMES.sub('<time>', json.loads(action).get('text', ''))}"
        for purpose, action in bot.query("select purpose, action from outbox order by id")
    ]
    return said + posted


def workspace_files(bot: Bot) -> dict[str, str]:
    root = bot.workspace()
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def finish_conversation(bot: Bot) -> None:
    """Restart the bot until the conversation is done, giving it what it waits for."""
    for _restart in range(6):
        ((lifecycle, wait),) = bot.query("select lifecycle, wait_kind from conversations")
        if lifecycle == "done":
            return
        lines = ""
        if wait == "plan_approval":
            ((plan_message,),) = bot.query(
                "select o.platform_message_id from outbox o join pending_requests p "
                "on o.request_id = p.id where p.kind = 'plan_approval' and o.purpose = 'milestone'"
            )
            lines = f"+✅ {plan_message}\n"
        elif wait == "question":
            lines = ">1 blue\n"
        else:
            assert lifecycle == "running", (lifecycle, wait)
        restarted = bot.run(lines)
        assert restarted.returncode == 0, restarted.stderr
    raise AssertionError("the conversation never finished")


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, str]]:
    bot = Bot(tmp_path_factory.mktemp("straight"), SCRIPT)
    done = bot.run(INPUT)
    assert done.returncode == 0, done.stderr
    assert bot.query("select lifecycle from conversations") == [("done",)]
    turns = [
        json.loads(b)
        for (b,) in bot.query("select body from journal where kind = 'assistant_turn'")
    ]
    ran = bot.query(
        "select name from tool_calls where name not in ('propose_plan', 'ask_user', 'finish')"
    )
    assert (sum(1 for t in turns if t["tool_calls"]), len(ran)) == (TURNS_WITH_CALLS, TOOL_RESULTS)
    return thread_text(bot), workspace_files(bot)


def test_the_straight_run_writes_each_line_once_and_answers(
    straight: tuple[list[str], dict[str, str]],
) -> None:
    text, files = straight
    assert files == {"log": "one\ntwo\nthree\n", "report.md": "colour: blue\n"}
    assert text[:2] == ["alice: write the log and the report", "alice: blue"]
    assert any("📋 Plan (v1)" in line for line in text)
    assert any("❓ Which colour?" in line for line in text)
    assert "The log has three lines; the report says blue." in text[-1]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_run_killed_at_a_fault_point_ends_as_the_straight_run(
    tmp_path: Path, fault: str, straight: tuple[list[str], dict[str, str]]
) -> None:
    bot = Bot(tmp_path, SCRIPT)
    killed = bot.run(INPUT, fault=fault)
    assert killed.returncode == -signal.SIGKILL, (fault, killed.stderr)

    finish_conversation(bot)

    assert (thread_text(bot), workspace_files(bot)) == straight
    assert bot.query("select count(*) from tool_calls where state != 'done'") == [(0,)]
