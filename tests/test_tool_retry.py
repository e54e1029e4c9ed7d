"""Retry policies of tool calls (issue 25): which calls are tried again, how long apart,
what the model reads, and the same after a kill.

A read-only tool that fails its first calls (``tests/flaky_bot.py``, its count in a
file of the workspace) runs under ``none``, ``fixed`` and ``exponential``
(:mod:`core.retry`); the waits go to the run context's ``sleep``, recorded here and
never waited. The call gets one result naming its attempts; the failed attempts
that were tried again are journaled, so a run killed at ``after_tool_attempt:K``
(in this process, and in a real console process) goes on to the same attempts, the
same delays, the same result and the same next model request as a run that was not
killed (docs/architecture.md, "Durability and exactly-once").
"""

from __future__ import annotations

import json
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.context import RunContext
from core.faults import Faults
from core.models.base import Message
from core.models.scripted import ScriptedModel, ScriptedTurn
from core.retry import (
    EXPONENTIAL_CAP,
    Exponential,
    Fixed,
    NoRetry,
    RetryPolicy,
    jitter_share,
    retry_policy,
)
from core.run.engine import Engine
from core.run.history import build_messages
from core.run.settings import EngineSettings
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.vocabulary.entries import JournalRecord, ToolAttempt, ToolResultEntry
from core.vocabulary.errors import ModelError
from core.vocabulary.inputs import Approve, ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from core.workflows import default_workflow
from tests.console_process import Bot, finish
from tests.engine_setup import ALICE, Killed, Setup, die_in_place
from tests.flaky_bot import FlakyRead
from tests.test_restart_differential import thread_text

CALL = "toolu_script_0_0"
"""The id of the first turn's first call (:mod:`core.models.scripted`)."""


# --- the policies -----------------------------------------------------------------


def test_none_makes_one_attempt_and_fixed_waits_the_same_delay() -> None:
    assert NoRetry().attempts == 1
    fixed = Fixed(attempts=4, delay_seconds=2.5)
    assert [fixed.delay(n, CALL) for n in (1, 2, 3)] == [2.5, 2.5, 2.5]


def test_exponential_doubles_up_to_its_cap() -> None:
    policy = Exponential(attempts=6, base_seconds=1.0, cap_seconds=5.0, jitter=0.0)
    assert [policy.delay(n, CALL) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_exponential_jitter_is_the_same_for_the_same_call_and_attempt() -> None:
    policy = Exponential(attempts=5, base_seconds=2.0, cap_seconds=100.0, jitter=0.5)
    delays = [policy.delay(n, CALL) for n in range(1, 5)]
    again = [Exponential.model_validate(policy.model_dump()).delay(n, CALL) for n in range(1, 5)]
    assert delays == again  # no draw: a restarted process computes the same delays
    for n, delay in enumerate(delays, start=1):
        full = 2.0 * 2 ** (n - 1)
        assert full * 0.5 <= delay <= full
        assert delay == full * (1 - 0.5 * jitter_share(CALL, n))
    others = {round(policy.delay(1, f"toolu_{i}"), 9) for i in range(20)}
    assert len(others) == 20  # spread across calls
    assert all(policy.delay(n, CALL) <= 100.0 for n in range(1, 30))


def test_a_policy_is_built_by_name() -> None:
    assert retry_policy("none", attempts=5) == NoRetry()
    assert retry_policy("fixed", attempts=5) == Fixed(attempts=5)
    built = retry_policy("exponential", attempts=2)
    assert isinstance(built, Exponential) and built.attempts == 2
    assert built.cap_seconds == EXPONENTIAL_CAP
    with pytest.raises(ValueError, match="unknown retry policy 'often'"):
        retry_policy("often")
    with pytest.raises(ValueError):
        retry_policy("fixed", attempts=0)


def test_a_channel_chooses_its_own_retry_policy_and_the_bot_s_holds_elsewhere(
    settings: Settings,
) -> None:
    channel = {"tool_retry": "exponential", "tool_retry_attempts": 5}
    data = settings.model_dump(exclude_unset=True) | {
        "tool_retry": "fixed",
        "slack": {"T0TEAM0001": {"channels": {"C0BUILDS01": channel}}},
    }
    layers = Settings.model_validate(data).layers()

    there = layers.at("slack", "T0TEAM0001", "C0BUILDS01").engine_settings(EngineSettings())
    elsewhere = layers.at("slack", "T0TEAM0001", "C0OTHER001").engine_settings(EngineSettings())
    assert there.tool_retry == Exponential(attempts=5)
    assert elsewhere.tool_retry == Fixed(attempts=3)
    assert EngineSettings().tool_retry == NoRetry()  # by default nothing is tried again
    with pytest.raises(ValueError, match="tool_retry"):
        Settings.model_validate(settings.model_dump(exclude_unset=True) | {"tool_retry": "often"})


# --- in one process ---------------------------------------------------------------

__all__ = ["die_in_place"]  # a fixture the tests below use, from tests.engine_setup


def flaky(fails: int, *, how: str = "retryable", name: str = "flaky_read") -> dict[str, Any]:
    return {"name": name, "input": {"fails": fails, "counter": "c", "how": how}}


def results(snap: ConversationSnapshot) -> dict[str, ToolResultEntry]:
    return {
        r.entry.tool_use_id: r.entry for r in snap.journal if isinstance(r.entry, ToolResultEntry)
    }


def attempts(snap: ConversationSnapshot) -> list[ToolAttempt]:
    return [r.entry for r in snap.journal if isinstance(r.entry, ToolAttempt)]


def result_blocks(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [
        block
        for m in messages
        if m["role"] == "user"
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]


async def straight(tmp_path: Path, policy: RetryPolicy, script: list[dict[str, Any]]) -> Setup:
    setup = Setup(tmp_path, policy, script)
    await setup.mention(setup.engine())
    return setup


async def test_a_flaky_read_only_call_is_tried_again_and_has_one_result_naming_its_attempts(
    tmp_path: Path,
) -> None:
    setup = await straight(
        tmp_path, Fixed(attempts=3, delay_seconds=2.0), [{"calls": [flaky(2)]}, finish("ok")]
    )

    snap = await setup.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert setup.sleeps == [2.0, 2.0]
    assert [(a.attempt, a.error, a.delay_seconds) for a in attempts(snap)] == [
        (1, "flaky failure 1", 2.0),
        (2, "flaky failure 2", 2.0),
    ]
    assert (Path(snap.workspace) / "c.count").read_text() == "3"
    said = "ok on try 3\n[after 3 attempts: flaky failure 1; flaky failure 2]"
    assert results(snap)[CALL] == ToolResultEntry(tool_use_id=CALL, content=said)
    assert snap.tool_calls[CALL].state is ToolState.DONE
    # the model read one result for the call, with its attempts; no attempt is a message
    second = setup.requests[1].messages
    assert result_blocks(second) == [{"type": "tool_result", "tool_use_id": CALL, "content": said}]
    answer = max(i for i, r in enumerate(snap.journal) if r.entry.kind == "assistant_turn")
    before = snap.journal[:answer]
    assert second == build_messages(before)
    assert second == build_messages([r for r in before if not isinstance(r.entry, ToolAttempt)])


async def test_exhausted_attempts_give_the_last_error_saying_how_many_were_made(
    tmp_path: Path,
) -> None:
    setup = await straight(
        tmp_path, Fixed(attempts=3, delay_seconds=1.0), [{"calls": [flaky(5)]}, finish("ok")]
    )

    snap = await setup.snapshot()
    assert setup.sleeps == [1.0, 1.0]
    assert (Path(snap.workspace) / "c.count").read_text() == "3"
    said = "flaky failure 3\n[gave up after 3 attempts: flaky failure 1; flaky failure 2]"
    assert results(snap)[CALL] == ToolResultEntry(tool_use_id=CALL, content=said, is_error=True)
    assert snap.tool_calls[CALL].state is ToolState.FAILED


async def test_a_crash_is_tried_again_after_exponential_delays(tmp_path: Path) -> None:
    policy = Exponential(attempts=4, base_seconds=3.0, cap_seconds=60.0, jitter=0.5)
    setup = await straight(tmp_path, policy, [{"calls": [flaky(3, how="crash")]}, finish("ok")])

    snap = await setup.snapshot()
    assert setup.sleeps == [policy.delay(n, CALL) for n in (1, 2, 3)]
    said = results(snap)[CALL].content
    assert said.startswith("ok on try 4\n[after 4 attempts: The tool crashed: RuntimeError(")


async def test_a_refusal_that_would_come_out_the_same_is_not_tried_again(tmp_path: Path) -> None:
    setup = await straight(
        tmp_path, Fixed(attempts=3), [{"calls": [flaky(2, how="refusal")]}, finish("ok")]
    )

    snap = await setup.snapshot()
    assert setup.sleeps == [] and attempts(snap) == []
    assert results(snap)[CALL] == ToolResultEntry(
        tool_use_id=CALL, content="flaky failure 1", is_error=True
    )


async def test_without_a_policy_a_failed_call_is_its_error_at_once(tmp_path: Path) -> None:
    setup = await straight(tmp_path, NoRetry(), [{"calls": [flaky(1)]}, finish("ok")])

    snap = await setup.snapshot()
    assert setup.sleeps == [] and attempts(snap) == []
    assert results(snap)[CALL] == ToolResultEntry(
        tool_use_id=CALL, content="flaky failure 1", is_error=True
    )


async def test_a_mutating_call_is_never_tried_again(tmp_path: Path) -> None:
    script = [
        {"calls": [{"name": "propose_plan", "input": {"steps": ["Write"]}}]},
        {"calls": [flaky(1, name="flaky_write")]},
        finish("ok"),
    ]
    setup = Setup(tmp_path, Fixed(attempts=3), script)
    engine = setup.engine()
    await setup.mention(engine)
    (request,) = (await setup.snapshot()).open_requests
    await engine.decide(setup.cid, Approve(request_id=request.id, by=ALICE))
    await engine.run(setup.cid)

    snap = await setup.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert setup.sleeps == [] and attempts(snap) == []
    assert results(snap)["toolu_script_1_0"] == ToolResultEntry(
        tool_use_id="toolu_script_1_0", content="flaky failure 1", is_error=True
    )


async def test_a_model_error_is_not_tried_again_by_a_tool_retry_policy(tmp_path: Path) -> None:
    model = ScriptedModel([ScriptedTurn(error=ModelError("overloaded", retryable=True))])
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    store = MemoryStore(render=render_event)
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox([*control_tools(), FlakyRead()]),
        settings=EngineSettings(tool_retry=Fixed(attempts=5)),
        context=RunContext(sleep=sleep),
    )
    cid = await store.threads.open_conversation(
        delivery_key="m-1",
        binding=PlatformRef(platform="console", channel="console", thread="m-1"),
        requester=ALICE,
        workspace_root=tmp_path,
        position=default_workflow().start,
    )
    assert cid is not None
    await engine.start(cid, ThreadMessage(text="check it", author=ALICE))

    assert len(model.requests) == 1  # the model client's own retries are all it gets
    assert sleeps == []
    assert str((await store.journal.load(cid)).status) == "waiting(retry)"


async def test_read_only_calls_side_by_side_still_commit_their_results_as_one(
    tmp_path: Path,
) -> None:
    script = [
        {"calls": [flaky(1), {"name": "list_files", "input": {}}]},
        finish("ok"),
    ]
    setup = await straight(tmp_path, Fixed(attempts=2, delay_seconds=0.5), script)

    turn = setup.commits.index(("assistant_turn",))
    assert setup.commits[turn + 1 : turn + 3] == [
        ("tool_attempt",),  # on its own, before the wait
        ("tool_result", "tool_result"),  # the batch's results: one commit
    ]
    assert setup.sleeps == [0.5]
    assert {CALL, "toolu_script_0_1"} <= results(await setup.snapshot()).keys()


async def test_after_tool_result_is_reached_once_per_call_not_per_attempt(
    tmp_path: Path, die_in_place: None
) -> None:
    setup = Setup(tmp_path, Fixed(attempts=3), [{"calls": [flaky(2)]}, finish("ok")])
    await setup.mention(setup.engine(Faults("after_tool_result:2")))  # never reached: no kill

    snap = await setup.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert len(attempts(snap)) == 2


KILLS = [
    (Fixed(attempts=3, delay_seconds=2.0), 2, 1),
    (Fixed(attempts=3, delay_seconds=2.0), 2, 2),
    (Exponential(attempts=4, base_seconds=1.0, cap_seconds=3.0), 3, 1),
    (Exponential(attempts=4, base_seconds=1.0, cap_seconds=3.0), 3, 3),
    (Fixed(attempts=3, delay_seconds=1.0), 9, 2),  # exhausted
]


@pytest.mark.parametrize(("policy", "fails", "kill_at"), KILLS)
async def test_a_run_killed_after_an_attempt_goes_on_as_the_uninterrupted_run(
    tmp_path: Path, die_in_place: None, policy: RetryPolicy, fails: int, kill_at: int
) -> None:
    script = [{"calls": [flaky(fails)]}, finish("checked")]
    whole = await straight(tmp_path / "straight", policy, script)

    setup = Setup(tmp_path / "killed", policy, script)
    with pytest.raises(Killed):
        await setup.mention(setup.engine(Faults(f"after_tool_attempt:{kill_at}")))
    killed = await setup.snapshot()
    assert [a.attempt for a in attempts(killed)] == list(range(1, kill_at + 1))
    assert CALL not in results(killed)
    assert setup.sleeps == whole.sleeps[: kill_at - 1]  # killed before its wait

    await setup.engine().run(setup.cid)  # a new process: a new engine on the same store

    done, expected = await setup.snapshot(), await whole.snapshot()
    assert done.status.lifecycle is Lifecycle.DONE
    assert attempts(done) == attempts(expected)  # the same attempts, errors and delays
    assert setup.sleeps == whole.sleeps
    assert results(done) == results(expected)
    assert (Path(done.workspace) / "c.count").read_text() == str(min(fails + 1, policy.attempts))
    assert setup.requests[-1].messages == whole.requests[-1].messages  # what the model read next
    assert len(setup.requests) == len(whole.requests)


# --- a real process, killed -------------------------------------------------------


class FlakyBot(Bot):
    """:class:`Bot` running ``python -m tests.flaky_bot console`` (the flaky tools in)."""

    module = "tests.flaky_bot"

    def journal(self) -> list[JournalRecord]:
        return [
            JournalRecord.model_validate({"seq": seq, "at": at, "entry": json.loads(body)})
            for seq, at, body in self.query(
                "select seq, created_at, body from journal order by seq"
            )
        ]


PROCESS_ENV = {"THREADBOT_TOOL_RETRY": "fixed", "THREADBOT_TOOL_RETRY_ATTEMPTS": "3"}
PROCESS_SCRIPT = [
    {"calls": [{"name": "flaky_read", "input": {"fails": 2, "counter": "c"}}]},
    finish("checked"),
]


def process_outcome(bot: FlakyBot) -> tuple[Any, ...]:
    journal = bot.journal()
    before_answer = max(i for i, r in enumerate(journal) if r.entry.kind == "assistant_turn")
    return (
        [r.entry for r in journal if r.entry.kind in ("tool_attempt", "tool_result")],
        build_messages(journal[:before_answer]),  # what the model read for its answer
        bot.query("select lifecycle from conversations"),
        (bot.workspace() / "c.count").read_text(),
        thread_text(bot),
    )


@pytest.fixture(scope="module")
def process_straight(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    bot = FlakyBot(tmp_path_factory.mktemp("straight"), PROCESS_SCRIPT, env=PROCESS_ENV)
    done = bot.run("check it\n")
    assert done.returncode == 0, done.stderr
    return process_outcome(bot)


def test_the_straight_process_run_tried_the_call_three_times(
    process_straight: tuple[Any, ...],
) -> None:
    entries, messages, lifecycle, count, thread = process_straight
    kinds = [e.kind for e in entries]
    assert kinds == ["tool_attempt", "tool_attempt", "tool_result", "tool_result"]  # + finish's
    said = "ok on try 3\n[after 3 attempts: flaky failure 1; flaky failure 2]"
    assert entries[2].content == said
    assert result_blocks(messages) == [
        {"type": "tool_result", "tool_use_id": "toolu_script_0_0", "content": said}
    ]
    assert (lifecycle, count) == ([("done",)], "3")
    assert any("flaky_read ok on try 3 (after 3 attempts)" in line for line in thread)


@pytest.mark.parametrize("kill_at", [1, 2])
def test_a_process_killed_after_an_attempt_ends_as_the_straight_run(
    tmp_path: Path, kill_at: int, process_straight: tuple[Any, ...]
) -> None:
    bot = FlakyBot(tmp_path, PROCESS_SCRIPT, env=PROCESS_ENV)
    killed = bot.run("check it\n", fault=f"after_tool_attempt:{kill_at}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(bot.query("select 1 from journal where kind = 'tool_attempt'")) == kill_at

    restarted = bot.run()
    assert restarted.returncode == 0, restarted.stderr

    assert process_outcome(bot) == process_straight
