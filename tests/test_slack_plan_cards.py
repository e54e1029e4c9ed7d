"""Slack plan cards: the plan is a ``plan`` block whose task cards move as the run works
(docs/architecture.md, "Plan cards"; issue 32).

The real bolt app and slack-sdk against the fakes. The deliverer and the Slack fake share
a :class:`~tests.fakes.clock.VirtualClock`, so "at most one edit of a card per second"
is read from the fake's records (``RecordedCall.at``) on the test's clock, and the
model's turns wait on gates, so each step's move is seen before the next one.
The shapes are Slack's (``tests/fixtures/slack/agent/chat_postMessage_plan_block.json``,
``chat_update_plan_progress.json``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from pathlib import Path
from typing import Any

from adapters.slack.plan_blocks import plan_blocks
from bot.settings import Settings
from conversations.events import PlanCard, PlanTask, PlatformRef, UpdateMessage
from conversations.plan_cards import PlanCardRows
from conversations.render import render_event
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import PlanProgress
from tests.conftest import wait_for
from tests.fakes.clock import VirtualClock
from tests.slack_harness import ALICE, CHANNEL, Workspace
from tests.test_delivery_slack import clocked_workspace

AGENT = Path(__file__).parent / "fixtures" / "slack" / "agent"
STEPS = [
    "Run the login tests ten times",
    "Read tests/test_login.py and the session fixture",
    "Fix the race in the fixture, run the tests again",
]


def agent_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((AGENT / f"{name}.json").read_text(encoding="utf-8"))
    return data


def plan_turn() -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": STEPS})])


def progress(n: int, gate: asyncio.Event | None = None) -> ScriptedTurn:
    note = {"step": f"step {n} of 3", "note": f"on step {n}"}
    return ScriptedTurn(calls=[ScriptedCall("report_progress", note)], gate=gate)


def finish(gate: asyncio.Event | None = None) -> ScriptedTurn:
    answer = {"answer": "The login test is fixed."}
    return ScriptedTurn(calls=[ScriptedCall("finish", answer)], gate=gate)


def plan_message(ws: Workspace, root: str) -> dict[str, Any]:
    found = [m for m in ws.posts(root) if any(b["type"] == "plan" for b in m.get("blocks", []))]
    assert found, f"no plan block in {ws.posts(root)}"
    return found[0]


def buttons(message: dict[str, Any]) -> dict[str, str]:
    return {
        element["text"]["text"]: element["value"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    }


def states(ws: Workspace, ts: str) -> list[tuple[str, ...]]:
    return [statuses for _, statuses in ws.api.plan_states(CHANNEL, ts)]


def assert_at_most_one_edit_a_second(ws: Workspace, ts: str) -> None:
    times = [at for at, _ in ws.api.plan_states(CHANNEL, ts)][1:]  # the edits, not the post
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times))


def test_a_card_is_drawn_in_the_shape_of_slacks_plan_block() -> None:
    [expected, _actions] = agent_fixture("chat_postMessage_plan_block")["payload"]["blocks"]
    card = PlanCard(title="Plan (v1)", version=1, tasks=tuple(PlanTask(title=s) for s in STEPS))

    [block] = plan_blocks(card, str)

    assert block["tasks"] == expected["tasks"]
    assert {k: v for k, v in block.items() if k not in ("block_id", "tasks")} == {
        "type": "plan",
        "title": "Plan (v1)",
    }
    moved = card.model_copy(
        update={"tasks": (PlanTask(title=STEPS[0], status="complete"), *card.tasks[1:])}
    )
    [again] = plan_blocks(moved, str)
    assert again["block_id"] != block["block_id"]  # a new block_id for each state
    assert again["tasks"][0]["block_id"] == "step_1-complete"
    assert plan_blocks(moved, str) == [again]  # the same card, the same blocks


async def test_the_plan_is_a_plan_block_whose_cards_move_as_the_run_works(
    settings: Settings,
) -> None:
    gates = [asyncio.Event() for _ in range(4)]
    turns = [progress(1, gates[0]), progress(2, gates[1]), progress(3, gates[2])]
    model = ScriptedModel([plan_turn(), *turns, finish(gates[3])])
    clock = VirtualClock()
    async with clocked_workspace(settings, model, clock) as ws:
        root = await ws.mention("please fix the flaky login test")
        await clock.until(
            lambda: any(b["type"] == "plan" for m in ws.posts(root) for b in m.get("blocks", []))
        )
        posted = plan_message(ws, root)
        ts = posted["ts"]
        [post] = [c for c in ws.api.calls_of("chat.postMessage") if c.response.get("ts") == ts]
        assert [b["type"] for b in post.args["blocks"]] == ["plan", "context", "actions"]
        assert post.args["text"].startswith("📋 Plan (v1) — reply here to change it")
        note = post.args["blocks"][1]["elements"][0]["text"]
        assert note.startswith("reply here to change it, or react :white_check_mark: to approve")
        assert note.endswith(f"\n<@{ALICE}>, this plan waits for your approval.")  # she asked
        assert set(buttons(posted)) == {"Approve", "Reject"}
        assert [(c, t, n) for c, t, n in ws.api.reactions if t == ts] == [
            (CHANNEL, ts, "white_check_mark"),
            (CHANNEL, ts, "x"),
        ]
        assert states(ws, ts) == [("pending",) * 3]

        await ws.deliver("interactive", ws.press_body(posted, buttons(posted)["Approve"]))
        shown: list[tuple[str, ...]] = [
            ("in_progress", "pending", "pending"),
            ("in_progress", "pending", "pending"),  # step 1 named: nothing moves
            ("complete", "in_progress", "pending"),
            ("complete", "complete", "in_progress"),
        ]
        for gate, expected in zip(gates, shown, strict=True):
            await clock.until(lambda expected=expected: states(ws, ts)[-1:] == [expected])
            gate.set()
        await clock.until(lambda: states(ws, ts)[-1:] == [("complete",) * 3])
        await clock.run(ws.app.deliverer.drain())

        assert states(ws, ts) == [
            ("pending",) * 3,  # the post
            ("pending",) * 3,  # approved: who, and no buttons
            ("in_progress", "pending", "pending"),
            ("complete", "in_progress", "pending"),
            ("complete", "complete", "in_progress"),
            ("complete",) * 3,
        ]
        assert_at_most_one_edit_a_second(ws, ts)
        shown_now = ws.api.message(CHANNEL, ts)
        assert shown_now is not None and buttons(shown_now) == {}
        context = [b for b in shown_now["blocks"] if b["type"] == "context"]
        assert context[0]["elements"][0]["text"] == f"✅ Approved by <@{ALICE}> (plan v1)"
        assert shown_now["text"].startswith(f"✅ Approved by <@{ALICE}> (plan v1)\n📋 Plan (v1)")
        assert ws.post(root, "✅ The login test is fixed.")
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE


async def test_steps_moving_faster_than_a_second_edit_the_card_once_a_second(
    settings: Settings,
) -> None:
    model = ScriptedModel([plan_turn(), progress(2), progress(3), finish()])
    clock = VirtualClock()
    async with clocked_workspace(settings, model, clock) as ws:
        root = await ws.mention("please fix the flaky login test")
        await clock.until(
            lambda: any(b["type"] == "plan" for m in ws.posts(root) for b in m.get("blocks", []))
        )
        posted = plan_message(ws, root)
        await ws.deliver("events_api", ws.reaction_body(posted["ts"], by=ALICE))  # by reaction

        async def ended() -> bool:
            return (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE

        # Every step moves while virtual time stands still (within one second, however
        # busy the machine: the clock jumps only when told), then time goes on
        # without draining (a drain sends what waits at once).
        await wait_for(ended)
        await clock.until(lambda: states(ws, posted["ts"])[-1:] == [("complete",) * 3])
        await clock.run(ws.app.deliverer.drain())

        seen = states(ws, posted["ts"])
        assert seen[0] == seen[1] == ("pending",) * 3 and seen[-1] == ("complete",) * 3
        assert len(seen) < 6  # the steps' moves within a second went as one edit
        assert_at_most_one_edit_a_second(ws, posted["ts"])
        steps = [r for r in await ws.app.store.outbox.rows() if r.purpose == "plan_steps"]
        assert {(r.state, r.platform_message_id) for r in steps} == {("sent", posted["ts"])}
        assert len(seen) - 2 < len(steps)  # a newer edit took the older ones along
        assert ws.post(root, "✅ The login test is fixed.")


async def test_a_workspace_without_plan_blocks_gets_the_plan_as_a_message(
    settings: Settings, caplog: Any
) -> None:
    model = ScriptedModel([plan_turn(), finish(), plan_turn(), finish()])
    clock = VirtualClock()
    async with clocked_workspace(settings, model, clock) as ws:
        ws.api.plan_blocks = False
        with caplog.at_level(logging.WARNING, logger="adapters.slack.sending"):
            root = await ws.mention("please fix the flaky login test")
            await clock.until(
                lambda: any("📋 Plan (v1)" in t for t in ws.api.posted_texts(CHANNEL, root))
            )
            posted = ws.post(root, "📋 Plan (v1)")
            assert [b["type"] for b in posted["blocks"]] == ["section", "actions"]
            await ws.deliver("interactive", ws.press_body(posted, buttons(posted)["Approve"]))
            await clock.until(
                lambda: any(
                    t.startswith("✅ The login") for t in ws.api.posted_texts(CHANNEL, root)
                )
            )
            other = await ws.mention("and the signup test", by=ALICE)
            await clock.until(
                lambda: any("📋 Plan (v1)" in t for t in ws.api.posted_texts(CHANNEL, other))
            )
            await clock.run(ws.app.deliverer.drain())

        posts = ws.api.calls_of("chat.postMessage")
        refused = [c for c in posts if c.response.get("error") == "invalid_blocks"]
        assert len(refused) == 1  # once per workspace, then plain
        assert refused[0].args["blocks"][0]["type"] == "plan"
        plans = [c for c in posts if c.ok and "📋 Plan (v1)" in c.args["text"]]
        assert len(plans) == 2
        assert all(b["type"] != "plan" for c in plans for b in c.args["blocks"])
        edits = [c for c in ws.api.calls_of("chat.update") if c.args["ts"] == posted["ts"]]
        assert edits and all(c.ok for c in edits)
        assert all(b["type"] != "plan" for c in edits for b in c.args["blocks"])
        decided = ws.api.message(CHANNEL, posted["ts"])
        assert decided is not None and buttons(decided) == {}
        assert decided["text"].startswith(f"✅ Approved by <@{ALICE}> (plan v1)")
        warned = [r for r in caplog.records if "invalid_blocks" in r.getMessage()]
        assert len(warned) == 1
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE


async def test_a_stop_marks_the_step_in_hand_error(settings: Settings) -> None:
    gate = asyncio.Event()
    held = progress(3, gate)
    model = ScriptedModel([plan_turn(), progress(2), held])
    clock = VirtualClock()
    async with clocked_workspace(settings, model, clock) as ws:
        root = await ws.mention("please fix the flaky login test")
        await clock.until(lambda: any("📋 Plan (v1)" in t for t in ws.api.posted_texts(CHANNEL)))
        posted = plan_message(ws, root)
        await ws.deliver("events_api", ws.reaction_body(posted["ts"], by=ALICE))
        await clock.until(held.started.is_set)
        await clock.until(
            lambda: states(ws, posted["ts"])[-1:] == [("complete", "in_progress", "pending")]
        )

        await ws.deliver("slash_commands", ws.command_body("/stop", by=ALICE))
        await clock.until(
            lambda: states(ws, posted["ts"])[-1:] == [("complete", "error", "pending")]
        )
        await clock.run(ws.app.deliverer.drain())

        assert states(ws, posted["ts"])[-1] == ("complete", "error", "pending")
        assert_at_most_one_edit_a_second(ws, posted["ts"])
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.CANCELLED


def test_only_slacks_threads_get_the_cards_edits() -> None:
    moved = PlanProgress(
        request_id="r1",
        version=1,
        steps=tuple(STEPS),
        statuses=("complete", "in_progress", "pending"),
        approved_by="<@U0ALICE001>",
    )
    change = Change(events=(moved,))
    rows = PlanCardRows(platforms=frozenset({"slack"}))
    slack = PlatformRef(platform="slack", workspace="T1", channel=CHANNEL, thread="1.2")
    discord = PlatformRef(platform="discord", workspace="G1", channel="9", thread="9")

    [row] = rows(slack, change)

    assert rows(discord, change) == ()
    assert render_event(discord, moved) == []  # elsewhere the progress notes say it
    assert (row.purpose, row.request_id) == ("plan_steps", "r1")
    assert isinstance(row.action, UpdateMessage) and row.action.plan is not None
    assert row.action.text == "✅ Approved by <@U0ALICE001> (plan v1)"
    assert [t.status for t in row.action.plan.tasks] == ["complete", "in_progress", "pending"]
