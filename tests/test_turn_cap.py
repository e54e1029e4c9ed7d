"""The turn cap per workflow step (issue 28): threadbot asks whether to go on.

``step_turn_limit`` (default 24, layered, lower is tighter) caps the model turns of one
workflow step, counted from the journal since the step was entered (a ``StepEntered``
entry) or since a person last gave the run work, whichever is later. At the cap the
run asks "go on?" in the thread (``⏸ I've used 2 model turns in the executing step
without finishing (its turn cap: 2)``) and waits in ``waiting(continue)``; going on is
a decision, so the count starts again. Asserted where a person and the store see it:
the thread through the console harness, the open request, the model's requests, and
a bot process killed mid-step and started again (``THREADBOT_FAULT``), which asks at
the same count. ``THREADBOT_MAX_TURNS``, the per-run cap it replaces, is read as its
old name with a warning at start; setting both is a settings error.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bot.app import build
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.agent import TurnCount, turns_in_step
from core.run.settings import EngineSettings
from core.vocabulary.entries import (
    AssistantTurn,
    DecisionEntry,
    JournalRecord,
    StepEntered,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import ContinueRequest, RequestState
from core.vocabulary.verdicts import Approved
from tests.console_process import Bot, command, plan
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.slack_harness import CHANNEL
from tests.test_settings_layers import explain_channel, layered, threadbot

ASKED = "⏸ I've used {n} model turns in the {step} step without finishing (its turn cap: {cap})"


HINT_END = " — react :white_check_mark: or press Continue to go on, :x: to stop here."


def run(cmd: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("run_command", {"command": cmd})])


def look() -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("list_files", {})])


def planned() -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Build it"]})])


def done(answer: str = "Built.") -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


async def started(settings: Settings, model: ScriptedModel) -> tuple[Any, Chat]:
    app = await build(settings, model=model)
    await app.start()
    return app, Chat(app)


def open_continue(snap: Any) -> ContinueRequest:
    [request] = [r for r in snap.open_requests if isinstance(r, ContinueRequest)]
    return request


# --- the console: the cap asks, "go on" starts the count again ------------------------


async def test_the_step_s_turn_cap_asks_and_going_on_starts_the_count_again(
    settings: Settings,
) -> None:
    settings.step_turn_limit = 2
    model = ScriptedModel(
        [planned(), run("echo 1"), run("echo 2"), run("echo 3"), run("echo 4"), done()]
    )
    app, chat = await started(settings, model)
    try:
        await chat.mention("build the project")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()

        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(continue)"
        assert len(model.requests) == 3  # the plan, then the executing step's 2 turns
        asked = ASKED.format(n=2, step="executing", cap=2)
        assert f"{asked} — react :white_check_mark: or press Continue" in chat.out.getvalue()
        first = open_continue(snap)
        assert first.prompt == "2 model turns in the executing step (its cap: 2); go on?"

        # "go on" in words from the requester is a decision: two more turns, then it asks again.
        await chat.reply("go on")
        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(continue)"
        assert len(model.requests) == 5
        assert [line for line in chat.said() if line.startswith("⏸")] == [asked + HINT_END] * 2
        assert "▶️ Continued by alice" in chat.said()
        [decided] = [r for r in snap.requests if r.id == first.id]
        assert decided.state is RequestState.DECIDED
        assert any(
            isinstance(r.entry, DecisionEntry) and r.entry.request_id == first.id
            for r in snap.journal
        )

        await chat.react(chat.bot_message("⏸", -1))
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert chat.said()[-1] == "✅ Built."
    assert len(model.requests) == 6


async def test_the_count_starts_again_in_each_workflow_step(settings: Settings) -> None:
    """Two look-arounds in the planning step reach its cap of 2 and ask, naming the
    planning step; after "go on", the plan and its approval, the executing step has
    its own 2 turns."""
    settings.step_turn_limit = 2
    model = ScriptedModel([look(), look(), planned(), run("echo 1"), run("echo 2"), done()])
    app, chat = await started(settings, model)
    try:
        await chat.mention("build the project")
        assert str((await chat.snapshot()).status) == "waiting(continue)"
        assert ASKED.format(n=2, step="planning", cap=2) in chat.out.getvalue()
        assert len(model.requests) == 2

        await chat.react(chat.bot_message("⏸"))
        await app.hub.settled()
        assert str((await chat.snapshot()).status) == "waiting(plan_approval)"
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(continue)"
        assert ASKED.format(n=2, step="executing", cap=2) in chat.out.getvalue()
        assert len(model.requests) == 5  # 2 looks, the plan, 2 commands
        assert open_continue(snap).prompt.startswith("2 model turns in the executing step")
    finally:
        await app.close()


def test_a_step_entered_starts_the_count_again_as_a_person_s_word_does() -> None:
    """The count read from the journal: a step entered without a person's word (a
    position the model moved to) starts it again too, and reading it as the journal
    grows gives the same count as reading it whole."""
    alice = Person(id="U1", name="alice")
    entries = [
        UserText(author=alice, text="build it"),
        StepEntered(position="planning", instructions="Plan."),
        AssistantTurn(text="look"),
        AssistantTurn(text="plan"),
        DecisionEntry(request_id="r1", verdict=Approved(), by=alice),
        StepEntered(position="executing", instructions="Do it."),
        AssistantTurn(text="one"),
        ToolResultEntry(tool_use_id="t1", content="ok"),
        AssistantTurn(text="two"),
        StepEntered(position="checking", instructions="Check it."),  # no person's word
        AssistantTurn(text="three"),
        UserText(author=alice, text="by the way", role="note"),  # a note gives no work
        AssistantTurn(text="four"),
    ]
    at = datetime(2026, 12, 3, tzinfo=UTC)
    journal = tuple(JournalRecord(seq=i + 1, at=at, entry=e) for i, e in enumerate(entries))
    assert turns_in_step(journal) == 2
    assert turns_in_step(journal[:9]) == 2  # the executing step's
    assert turns_in_step(journal[:4]) == 2  # the planning step's
    assert turns_in_step(journal[:10]) == 0

    counted = TurnCount()
    grown = [counted(journal[:k]) for k in range(len(journal) + 1)]
    assert grown == [turns_in_step(journal[:k]) for k in range(len(journal) + 1)]
    assert grown == [0, 0, 0, 1, 2, 0, 0, 1, 1, 2, 0, 1, 1, 2]


# --- the setting: layered, at least one, the old name ----------------------------------


def test_the_step_turn_limit_is_layered_at_least_one_and_24_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings(database_url="memory://").step_turn_limit == 24
    assert EngineSettings().step_turn_limit == 24
    monkeypatch.setenv("THREADBOT_STEP_TURN_LIMIT", "10")
    s = layered(
        Settings(database_url="memory://"),
        slack={TEAM_ID: {"channels": {CHANNEL: {"step_turn_limit": 5}}}},
    )
    layers = s.layers()
    here = layers.at("slack", TEAM_ID, CHANNEL).engine_settings(EngineSettings())
    assert here.step_turn_limit == 5
    other = layers.at("slack", TEAM_ID, "C0OTHER001").engine_settings(EngineSettings())
    assert other.step_turn_limit == 10
    with pytest.raises(ValidationError, match="step_turn_limit"):
        Settings(database_url="memory://", step_turn_limit=0)
    with pytest.raises(ValueError, match="at least 1"):
        EngineSettings(step_turn_limit=0)

    explained = explain_channel(
        tmp_path, toml="[slack.T0123.channels.C0456]\nstep_turn_limit = 5\n"
    )
    assert explained.returncode == 0, explained.stderr
    assert "step_turn_limit = 5  (slack channel C0456)" in explained.stdout
    refused = threadbot(
        tmp_path, "settings", "explain", "--platform", "slack", THREADBOT_STEP_TURN_LIMIT="0"
    )
    assert refused.returncode == 2
    assert "THREADBOT_STEP_TURN_LIMIT ('0'): must be at least 1" in refused.stderr


WARNED = (
    "THREADBOT_MAX_TURNS is the old name of step_turn_limit (THREADBOT_STEP_TURN_LIMIT): "
    "read as step_turn_limit = 2; rename it"
)


def test_the_old_threadbot_max_turns_is_read_as_the_step_turn_limit_with_a_warning(
    tmp_path: Path,
) -> None:
    explained = threadbot(
        tmp_path, "settings", "explain", "--platform", "console", toml="", THREADBOT_MAX_TURNS="2"
    )
    assert explained.returncode == 0, explained.stderr
    assert "step_turn_limit = 2  (bot settings (THREADBOT_MAX_TURNS))" in explained.stdout
    assert explained.stderr.count(WARNED) == 1

    # A run with the old name asks at its value, in the step, and warns once at start.
    (tmp_path / "bot").mkdir()
    bot = Bot(
        tmp_path / "bot",
        [plan("Write the log"), *({"calls": [command(f"echo {n} >> log")]} for n in range(5))],
        env={"THREADBOT_MAX_TURNS": "2"},
    )
    done = bot.run("write the log\n+✅ 2\n")
    assert done.returncode == 0, done.stderr
    assert ASKED.format(n=2, step="executing", cap=2) in done.stdout
    assert done.stderr.count("THREADBOT_MAX_TURNS is the old name of step_turn_limit") == 1
    assert bot.query("select lifecycle, wait_kind from conversations") == [("waiting", "continue")]

    # Its key at the top of threadbot.toml is read alike.
    toml = threadbot(
        tmp_path, "settings", "explain", "--platform", "console", toml="max_turns = 7\n"
    )
    assert toml.returncode == 0, toml.stderr
    assert "step_turn_limit = 7  (bot settings (threadbot.toml))" in toml.stdout
    assert "max_turns in threadbot.toml is the old name of step_turn_limit" in toml.stderr


@pytest.mark.parametrize(
    ("toml", "env", "said"),
    [
        (
            "",
            {"THREADBOT_MAX_TURNS": "30", "THREADBOT_STEP_TURN_LIMIT": "24"},
            "threadbot settings: THREADBOT_MAX_TURNS is the old name of step_turn_limit, which "
            "is set too (THREADBOT_STEP_TURN_LIMIT): keep step_turn_limit only",
        ),
        (
            "step_turn_limit = 12\n",
            {"THREADBOT_MAX_TURNS": "30"},
            "THREADBOT_MAX_TURNS is the old name of step_turn_limit, which is set too "
            "(step_turn_limit in threadbot.toml): keep step_turn_limit only",
        ),
        (
            "[slack.T0123.channels.C0456]\nmax_turns = 5\n",
            {},
            "threadbot.toml: slack.T0123.channels.C0456.max_turns: the old name of "
            "step_turn_limit: set that",
        ),
    ],
)
def test_the_old_name_and_the_new_both_set_is_a_settings_error(
    tmp_path: Path, toml: str, env: dict[str, str], said: str
) -> None:
    refused = threadbot(tmp_path, "settings", "explain", "--platform", "slack", toml=toml, **env)
    assert refused.returncode == 2
    assert said in refused.stderr
    assert "Traceback" not in refused.stderr


# --- a restart mid-step ---------------------------------------------------------------


def test_the_count_survives_a_restart_mid_step(tmp_path: Path) -> None:
    """The bot is killed after the executing step's second turn was committed, before its
    command ran; started again, it runs that command and asks after one more turn (the
    cap is 3), not after 3 fresh ones."""
    bot = Bot(
        tmp_path,
        [plan("Write the log"), *({"calls": [command(f"echo {n} >> log")]} for n in range(1, 8))],
        env={"THREADBOT_STEP_TURN_LIMIT": "3"},
    )
    killed = bot.run("write the log\n+✅ 2\n", fault="after_model_response:3")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert bot.query("select count(*) from journal where kind = 'assistant_turn'") == [(3,)]
    assert (bot.workspace() / "log").read_text() == "1\n"

    again = bot.run()
    assert again.returncode == 0, again.stderr
    assert ASKED.format(n=3, step="executing", cap=3) in again.stdout
    assert bot.query("select lifecycle, wait_kind from conversations") == [("waiting", "continue")]
    assert bot.query("select count(*) from journal where kind = 'assistant_turn'") == [(4,)]
    assert (bot.workspace() / "log").read_text() == "1\n2\n"  # the third's command waits
    assert bot.query("select count(*) from pending_requests where kind = 'continue'") == [(1,)]

    # Going on after the restart: three more turns, then the cap again.
    on = bot.run("+✅ 5\n")  # the request is the thread's fifth message
    assert on.returncode == 0, on.stderr
    assert bot.query("select count(*) from journal where kind = 'assistant_turn'") == [(7,)]
    assert (bot.workspace() / "log").read_text() == "1\n2\n3\n4\n5\n"
    assert bot.query("select lifecycle, wait_kind from conversations") == [("waiting", "continue")]
