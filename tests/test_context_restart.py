"""A run under a context strategy, killed at every fault point, ends as the straight run.

The conversation of :mod:`tests.test_restart_differential` (plan, approval, a question,
commands, answer), with ``report_progress`` calls moving through the plan, runs in
``python -m bot console`` processes with ``THREADBOT_CONTEXT_STRATEGY`` set to
``task_list``, ``task_tree`` or ``none`` (``flat``, the default, is
:mod:`tests.test_restart_differential`'s): once straight, and once per fault point and count
(``after_model_response:K``, ``after_tool_result:K``), killed there with SIGKILL and
restarted until done. Every run ends with the same thread text and files, the same
notes journaled (none twice: a restart derives the same state and commits nothing
new), and every request the model was sent, before and after the restart, equal to
the straight run's (docs/architecture.md, "Context strategies and notes").
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from core.models.base import Message
from core.run.history import build_messages
from core.vocabulary.entries import AssistantTurn, ContextNote, JournalRecord
from tests.console_process import Bot, command, finish, plan
from tests.test_restart_differential import finish_conversation, thread_text, workspace_files


def progress(step: str) -> dict:
    return {"name": "report_progress", "input": {"note": f"now {step}", "step": step}}


SCRIPT = [
    plan("Write the log", "Ask for the colour", "Write the report"),
    {"text": "Starting.", "calls": [command("echo one >> log"), progress("step 2 of 3")]},
    {"calls": [{"name": "ask_user", "input": {"question": "Which colour?"}}]},
    {"calls": [progress("step 3 of 3"), command("echo three >> log")]},
    finish("The log has two lines; the colour is blue."),
]
FAULTS = [f"after_model_response:{k}" for k in range(1, 6)] + [
    f"after_tool_result:{k}" for k in range(1, 3)
]
INPUT = "write the log and the report\n+✅ 2\n>1 blue\n"
STRATEGIES = ["task_list", "task_tree", "none"]

Run = tuple[list[str], dict[str, str], list[str], list[list[Message]]]
"""Thread text, workspace files, the notes journaled, the requests the model was sent."""


def ended(bot: Bot) -> Run:
    records = TypeAdapter(list[JournalRecord]).validate_python(
        [
            {"seq": seq, "at": at, "entry": json.loads(body)}
            for seq, at, body in bot.query("select seq, created_at, body from journal order by seq")
        ]
    )
    notes = [r.entry.text for r in records if isinstance(r.entry, ContextNote)]
    # What each model call was sent: the history up to the turn it answered.
    requests = [
        build_messages(records[:i])
        for i, r in enumerate(records)
        if isinstance(r.entry, AssistantTurn)
    ]
    return thread_text(bot), workspace_files(bot), notes, requests


def bot_for(path: Path, strategy: str) -> Bot:
    return Bot(path, SCRIPT, env={"THREADBOT_CONTEXT_STRATEGY": strategy})


@pytest.fixture(scope="module", params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def straight(strategy: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    bot = bot_for(tmp_path_factory.mktemp("straight"), strategy)
    done = bot.run(INPUT)
    assert done.returncode == 0, done.stderr
    assert bot.query("select lifecycle from conversations") == [("done",)]
    return ended(bot)


def test_the_straight_run_tells_the_model_its_plan_as_steps_get_done(
    strategy: str, straight: Run
) -> None:
    text, files, notes, requests = straight
    assert files == {"log": "one\nthree\n"}
    assert "The log has two lines; the colour is blue." in text[-1]
    assert len(requests) == len(SCRIPT)
    if strategy == "task_list":
        assert notes == [
            "Task list (plan v1):\n[>] 1. Write the log\n[ ] 2. Ask for the colour\n"
            "[ ] 3. Write the report",
            "Task list (plan v1):\n[x] 1. Write the log\n[>] 2. Ask for the colour\n"
            "[ ] 3. Write the report",
            "Task list (plan v1):\n[x] 1. Write the log\n[x] 2. Ask for the colour\n"
            "[>] 3. Write the report",
        ]
    elif strategy == "none":
        assert notes == []  # nothing told, nothing to rebuild
    else:
        root = "Task path: write the log and the report"
        assert notes == [
            root,
            f"{root} > step 1. Write the log",
            f"{root} > step 2. Ask for the colour",
            f"{root} > step 3. Write the report",
        ]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_run_killed_at_a_fault_point_ends_as_the_straight_run(
    tmp_path: Path, fault: str, strategy: str, straight: Run
) -> None:
    bot = bot_for(tmp_path, strategy)
    killed = bot.run(INPUT, fault=fault)
    assert killed.returncode == -signal.SIGKILL, (fault, killed.stderr)

    finish_conversation(bot)

    assert ended(bot) == straight
    assert bot.query("select count(*) from tool_calls where state != 'done'") == [(0,)]
