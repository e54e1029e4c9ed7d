"""Discord plan cards and the typing indicator (docs/architecture.md, "Plan cards",
"Agent sessions"; issue 32).

The real discord.py against FakeDiscord: the plan is a Components V2 message (flag
``1 << 15``, no ``content``) whose container holds a Text Display per step; as the run
works each step's mark moves, edited in place on the same message; Approve, Reject and
Stop work by button, and ✅ by reaction; a plan past Discord's 40 components or 4,000
characters is posted as today's plain message; the thread shows the bot typing while a
run works and not while it waits for a person. The model's turns wait on gates, so each
step's move is seen before the next one.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest

from adapters.discord.outbound import MAX_TEXT, render
from adapters.discord.plan_card import (
    IS_COMPONENTS_V2,
    MAX_COMPONENTS,
    MAX_STEPS,
    card_components,
)
from adapters.discord.plan_card import MAX_TEXT as CARD_TEXT
from bot.settings import Settings
from conversations.events import PlanCard, PlatformRef, PostReply
from conversations.plan_cards import plan_message
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import PlanProposed
from tests.conftest import wait_for
from tests.fakes.discord_api import (
    GUILD_ID,
    HUMAN_USERS,
    RecordedCall,
    all_components,
    display_texts,
    next_seq,
    shown_text,
)
from tests.test_discord_story import ALICE, BOB, WAIT, Guild, buttons, discord_guild
from tests.test_slack_plan_cards import STEPS, finish, plan_turn, progress

MARKS = ("◻️", "⏳", "✅", "⚠️")


def card(g: Guild, thread: str) -> dict[str, Any]:
    """The plan's message as Discord holds it now."""
    return g.post(thread, "📋 Plan (v")


def marks(message: dict[str, Any]) -> tuple[str, ...]:
    """Each step's mark on a card (``""`` for a step shown without one)."""
    steps = [t for t in display_texts(message.get("components") or []) if ". " in t[:8]]
    return tuple(next((m for m in MARKS if t.startswith(m + " ")), "") for t in steps)


async def until(check: Callable[[], bool]) -> None:
    """Wait for ``check`` to hold (the event the test expects), at most :data:`WAIT`."""
    await wait_for(check, seconds=WAIT)


def posted_by(g: Guild, message: dict[str, Any]) -> RecordedCall:
    """The Create Message call that posted ``message``."""
    [call] = [
        c
        for c in g.fake.calls_to("POST", route="/channels/{channel_id}/messages")
        if isinstance(c.response, dict) and c.response.get("id") == message["id"]
    ]
    return call


async def press(
    g: Guild, thread: str, message: dict[str, Any], label: str, *, by: str = ALICE
) -> int:
    """``by`` (Alice) presses ``label`` on ``message``; the dispatch's seq, once the bot
    took it (the run it lets go on may be held on a gate: the hub is not waited for)."""
    d = g.interaction_d("interaction_create_button", thread)
    name = HUMAN_USERS[by]
    d["member"]["user"].update(id=by, username=name[0], global_name=name[1])
    d["message"] = copy.deepcopy(message)
    d["data"] = {"custom_id": buttons(message)[label], "component_type": 2}
    s = await g.dispatch("INTERACTION_CREATE", d, settle=False)
    await until(lambda: g.adapter is not None and g.adapter.processed_seq >= s)
    return s


async def test_the_plan_is_a_components_v2_card_whose_steps_move_as_the_run_works(
    settings: Settings,
) -> None:
    gates = [asyncio.Event() for _ in range(4)]
    turns = [progress(1, gates[0]), progress(2, gates[1]), progress(3, gates[2])]
    model = ScriptedModel([plan_turn(), *turns, finish(gates[3])])
    async with discord_guild(settings, model) as g:
        thread = await g.mention("please fix the flaky login test")
        posted = card(g, thread)
        post = posted_by(g, posted)
        assert post.json["flags"] & IS_COMPONENTS_V2
        assert "content" not in post.json and posted["content"] == ""
        [container, mention] = post.json["components"]
        assert container["type"] == 17 and mention["type"] == 10
        texts = display_texts([container])
        assert texts[0].startswith("📋 Plan (v1) — reply here to change it")
        assert texts[1:4] == [f"{n}. {step}" for n, step in enumerate(STEPS, start=1)]
        assert mention["content"] == f"<@{ALICE}>, this plan waits for your approval."
        assert list(buttons(posted)) == ["Approve", "Reject", "Stop"]

        await press(g, thread, posted, "Approve")
        await until(lambda: marks(card(g, thread)) == ("⏳", "◻️", "◻️"))
        assert shown_text(card(g, thread)).startswith(f"✅ Approved by <@{ALICE}> (plan v1)")
        assert list(buttons(card(g, thread))) == ["Stop"]  # the run works: it may be stopped

        gates[0].set()
        gates[1].set()
        await until(lambda: marks(card(g, thread)) == ("✅", "⏳", "◻️"))
        gates[2].set()
        await until(lambda: marks(card(g, thread)) == ("✅", "✅", "⏳"))
        gates[3].set()
        await until(lambda: marks(card(g, thread)) == ("✅", "✅", "✅"))
        await g.settle()

        edits = [c.json for c in g.fake.edits(posted["id"])]
        assert all(e["flags"] & IS_COMPONENTS_V2 and "content" not in e for e in edits)
        seen = [marks(e) for e in edits if marks(e) and marks(e) != ("", "", "")]
        assert seen == [
            ("⏳", "◻️", "◻️"),
            ("✅", "⏳", "◻️"),
            ("✅", "✅", "⏳"),
            ("✅", "✅", "✅"),
        ]  # one message, edited in place, each state once
        assert buttons(card(g, thread)) == {}  # answered: nothing left to press
        assert [m["id"] for m in g.fake.posted(thread) if "📋" in shown_text(m)] == [posted["id"]]
        snap = await g.snapshot(thread)
        assert snap.status.lifecycle is Lifecycle.DONE


async def test_reject_by_button_and_approve_by_reaction_still_decide_the_card(
    settings: Settings,
) -> None:
    model = ScriptedModel([plan_turn(), plan_turn(), finish()])
    async with discord_guild(settings, model) as g:
        thread = await g.mention("please fix the flaky login test")
        first = card(g, thread)
        await press(g, thread, first, "Reject")
        await g.settle()
        rejected = g.fake.messages[str(first["id"])]
        assert shown_text(rejected).startswith(f"❌ Rejected by <@{ALICE}> (plan v1)\n📋 Plan (v1)")
        assert rejected["flags"] & IS_COMPONENTS_V2 and buttons(rejected) == {}

        await g.reply(thread, "try again, please")
        second = g.post(thread, "📋 Plan (v2)")
        await g.react(thread, str(second["id"]), "✅")
        await g.settle()
        approved = g.fake.messages[str(second["id"])]
        assert shown_text(approved).startswith(f"✅ Approved by <@{ALICE}> (plan v2)")
        assert marks(approved) == ("✅", "✅", "✅")
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.DONE


async def test_the_cards_stop_button_stops_the_run_and_the_step_shows_the_error(
    settings: Settings,
) -> None:
    gate = asyncio.Event()
    model = ScriptedModel([plan_turn(), progress(1, gate), finish()])
    async with discord_guild(settings, model) as g:
        thread = await g.mention("please fix the flaky login test")
        await press(g, thread, card(g, thread), "Approve")
        await until(lambda: marks(card(g, thread)) == ("⏳", "◻️", "◻️"))

        await press(g, thread, card(g, thread), "Stop", by=BOB)  # may not stop Alice's run
        refused = f"Only the requester or an approver can stop this, <@{BOB}>."
        await until(lambda: any(p.startswith(refused) for p in g.posts(thread)))
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.RUNNING

        await press(g, thread, card(g, thread), "Stop")
        await until(lambda: marks(card(g, thread)) == ("⚠️", "◻️", "◻️"))
        gate.set()
        await g.settle()
        assert any(p.startswith(f"⏹ Stopped by <@{ALICE}>") for p in g.posts(thread))
        assert buttons(card(g, thread)) == {}
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.CANCELLED


async def test_the_thread_shows_the_bot_typing_while_a_run_works_not_while_it_waits(
    settings: Settings,
) -> None:
    gate = asyncio.Event()
    model = ScriptedModel([plan_turn(), progress(1, gate), finish()])
    async with discord_guild(settings, model, typing_every=0.02) as g:
        assert g.adapter is not None
        typing = g.adapter.typing
        thread = await g.mention("please fix the flaky login test")
        posted = card(g, thread)
        plan_seq = posted_by(g, posted).seq
        assert any(c.seq < plan_seq for c in g.fake.typing(thread))  # the planner worked
        assert thread not in typing.channels  # the plan waits for Alice: no typing loop

        pressed = next_seq()  # a mark in the fake's order of records
        await press(g, thread, posted, "Approve")
        # The run works, held on its gate: the indicator is triggered again and again.
        await until(lambda: len([c for c in g.fake.typing(thread) if c.seq > pressed]) >= 3)
        assert thread in typing.channels
        assert all(c.status == 204 for c in g.fake.typing(thread))

        gate.set()
        await g.settle()
        assert thread not in typing.channels  # answered: the indicator fades
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.DONE


async def test_a_thread_where_typing_is_refused_still_gets_its_answer(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([plan_turn(), finish()])
    async with discord_guild(settings, model, typing_every=0.02) as g:
        d = g.mention_d("please fix the flaky login test")
        thread = str(d["id"])
        g.fake.fail(f"/channels/{thread}/typing", 403, 50013, "Missing Permissions", times=999)
        with caplog.at_level(logging.WARNING, logger="adapters.discord.typing"):
            await g.dispatch("MESSAGE_CREATE", d)
            await press(g, thread, card(g, thread), "Approve")
            await g.settle()
        assert g.post(thread, "✅ The login test is fixed.")
        assert len(g.fake.typing(thread)) >= 2 and all(
            c.status == 403 for c in g.fake.typing(thread)
        )
        said = [r for r in caplog.records if "could not show typing" in r.getMessage()]
        assert len(said) == 1  # once, not at every trigger


def plan_of(steps: list[str]) -> PostReply:
    ref = PlatformRef(platform="discord", workspace=GUILD_ID, channel="1", thread="2")
    event = PlanProposed(request_id="r1", version=1, steps=tuple(steps), tools=("run_command",))
    action = plan_message(ref, event, "white_check_mark", "x").action
    assert isinstance(action, PostReply)
    return action


def test_a_card_stays_within_40_components_and_4000_characters() -> None:
    most = plan_of([f"step {n}" for n in range(1, MAX_STEPS + 1)])
    [call] = render(most, nonce="k")
    assert call.json is not None and call.json["flags"] & IS_COMPONENTS_V2
    assert len(all_components(call.json["components"])) <= MAX_COMPONENTS
    long = plan_of(["x" * 78] * MAX_STEPS)  # as long as steps may be and still fit
    [call] = render(long, nonce="k")
    assert call.json is not None and call.json["flags"] & IS_COMPONENTS_V2
    assert sum(len(t) for t in display_texts(call.json["components"])) <= CARD_TEXT
    empty = PlanCard(title="Plan (v1)", version=1, tasks=())
    assert card_components("", empty, (), mentions=False, button=lambda b: {}) is None


def test_a_step_of_several_lines_is_one_text_display() -> None:
    [call] = render(plan_of(["Read the logs\nand the fixture", "Fix it"]), nonce="k")
    assert call.json is not None and call.json["flags"] & IS_COMPONENTS_V2
    texts = display_texts(call.json["components"])
    assert texts[1:3] == ["1. Read the logs\nand the fixture", "2. Fix it"]
    assert texts[3] == "Tools this plan needs: run_command"


def test_a_plan_too_big_for_a_card_is_posted_as_plain_text_as_today() -> None:
    many = plan_of([f"step {n}" for n in range(1, MAX_STEPS + 2)])  # one too many
    long = plan_of(["x" * 150] * 30)  # past 4,000 characters
    for action in (many, long):
        calls = render(action, nonce="k")
        assert calls and all("content" in c.json for c in calls if c.json is not None)
        assert not any((c.json or {}).get("flags", 0) & IS_COMPONENTS_V2 for c in calls)
        assert all(len(str((c.json or {})["content"])) <= MAX_TEXT for c in calls)
        last = calls[-1].json or {}
        labels = [b["label"] for row in last["components"] for b in row["components"]]
        assert labels == ["Approve", "Reject"]


async def test_a_long_plan_reaches_discord_as_plain_messages(settings: Settings) -> None:
    steps = [f"step {n}: " + "y" * 150 for n in range(1, 31)]
    turn = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": steps})])
    model = ScriptedModel([turn, finish()])
    async with discord_guild(settings, model) as g:
        thread = await g.mention("please fix the flaky login test")
        parts = [m for m in g.fake.posted(thread) if "webhook_id" not in m]
        assert len(parts) >= 2 and not any(m["flags"] & IS_COMPONENTS_V2 for m in parts)
        assert parts[0]["content"].startswith("📋 Plan (v1)")
        assert list(buttons(parts[-1])) == ["Approve", "Reject"]
        await press(g, thread, parts[-1], "Approve")
        await g.settle()
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.DONE
