"""A scheduled run on Slack (issue 29, "Time"): through the real bolt app and slack-sdk
against the Slack fake, the sweeper on a clock the test moves.

At its time the bot posts the scheduled message at the top of the channel, and the
conversation lives in that message's thread: its plan is posted there, the owner (its
requester) approves it with a reaction where a bystander is refused, and the answer
follows in the same thread. The time is recorded once with the conversation it started;
another sweep at the same time starts nothing more.
"""

from __future__ import annotations

from typing import Any

from bot.settings import Settings
from conversations.store.schedules import Outcome
from core.context import ManualClock
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import UserText
from core.vocabulary.lifecycle import Lifecycle
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID
from tests.slack_harness import ALICE, BOB, CHANNEL, Workspace, slack_workspace
from tests.test_schedules import MONDAY_9
from tests.test_settings_layers import layered, posted

SCHEDULE = {
    "name": "morning-check",
    "cron": "0 9 * * *",
    "team": TEAM_ID,
    "channel": CHANNEL,
    "request": "look around the repository",
    "owner": ALICE,
}
ANNOUNCED = f"⏰ Scheduled run `morning-check` for <@{ALICE}>: look around the repository"


def top_level(ws: Workspace) -> list[dict[str, Any]]:
    """The bot's messages at the top of the channel (not in a thread)."""
    return [
        m
        for m in ws.api.messages(CHANNEL)
        if m.get("user") == BOT_USER_ID and m.get("thread_ts") in (None, m["ts"])
    ]


async def test_a_scheduled_run_posts_its_message_and_works_in_its_thread(settings) -> None:
    s: Settings = layered(settings, slack_bot_token="xoxb-test", schedules=[SCHEDULE])
    plan = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Look", "Report"]})])
    done = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "All quiet."})])
    model = ScriptedModel([plan, done])
    clock = ManualClock(MONDAY_9.replace(hour=8, minute=59, second=30))
    async with slack_workspace(s, model, wall_clock=clock) as ws:
        await ws.app.sweeper.sweep_once()  # first seen: yesterday's time is no backlog
        await ws.app.hub.settled()
        assert top_level(ws) == []
        clock.advance(45)  # 9:00:15
        await ws.app.sweeper.sweep_once()
        await ws.app.hub.settled()

        [message] = top_level(ws)
        assert message["text"] == ANNOUNCED
        thread = str(message["ts"])
        snap = await ws.snapshot(thread)
        assert str(snap.status) == "waiting(plan_approval)"
        assert snap.requester.id == ALICE
        [request] = [e for e in snap.journal if isinstance(e.entry, UserText)][:1]
        assert request.entry.text == "look around the repository"
        plan_post = posted(ws, CHANNEL, thread, "📋 Plan (v1)")
        assert plan_post["thread_ts"] == thread

        await ws.react(plan_post["ts"], by=BOB)
        assert posted(ws, CHANNEL, thread, "Only the requester or an approver")
        await ws.react(plan_post["ts"], by=ALICE)
        assert (await ws.snapshot(thread)).status.lifecycle is Lifecycle.DONE
        assert posted(ws, CHANNEL, thread, "All quiet.")

        await ws.app.sweeper.sweep_once()  # the same time again: nothing more
        await ws.app.hub.settled()
        assert len(top_level(ws)) == 1
        runs = await ws.app.store.schedules.runs("morning-check")
        assert [(r.due, r.outcome, r.conversation_id) for r in runs] == [
            (MONDAY_9.replace(day=6), Outcome.SEEN, None),
            (MONDAY_9, Outcome.STARTED, snap.id),
        ]
        assert len(model.requests) == 2
