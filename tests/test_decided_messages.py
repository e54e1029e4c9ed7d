"""A decided request's message shows the decision and loses its buttons (issue 9).

The same stories on Slack, Discord and the console (:mod:`tests.platform_threads`):
Alice asks, Bob is an approver. Each test reads the message as the fake platform
holds it now (Slack after ``chat.update``, Discord after the message edit, the
console's last ``(edited)`` print) and what the store holds: the request's state
and the outbox row (purpose ``closed``) that made the edit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.app import App
from conversations.events import OutboundAction, UpdateMessage
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestKind, RequestState
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Approved, Revised
from tests.platform_threads import Shown, on
from tests.test_discord_story import _restore_discord_py  # noqa: F401  (restores discord.py)
from tests.test_slack_story import finish

PLATFORMS = pytest.mark.parametrize("platform", ["slack", "discord", "console"])


def proposes(*steps: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": list(steps)})])


def gated_pair() -> ScriptedTurn:
    """Two calls the default policy asks about, in one turn: one approval message."""
    return ScriptedTurn(
        calls=[
            ScriptedCall("run_command", {"command": "rm -rf build"}),
            ScriptedCall("run_command", {"command": "git push origin main"}),
        ]
    )


async def closing_rows(app: App) -> list[tuple[str, str, str | None, str]]:
    """``(request id, state, platform message id, outcome line)`` of every edit row."""
    rows = [r for r in await app.store.outbox.rows() if r.purpose == "closed"]
    return [(str(r.request_id), r.state, r.platform_message_id, _outcome(r.action)) for r in rows]


def _outcome(action: OutboundAction) -> str:
    assert isinstance(action, UpdateMessage)
    return action.text


def _plans(snap: ConversationSnapshot) -> list[Any]:
    return [r for r in snap.requests if r.kind is RequestKind.PLAN_APPROVAL]


Check = Callable[[Shown], None]


def decided(first_line: str, rest: str) -> Check:
    """The message starts with ``first_line``, then the original without its hint; no buttons."""

    def check(shown: Shown) -> None:
        assert shown.text.startswith(f"{first_line}\n{rest}"), shown.text
        assert " — react" not in shown.text and "reply here to change" not in shown.text
        assert shown.buttons == [], shown

    return check


# --- the stories --------------------------------------------------------------------------


@PLATFORMS
async def test_a_revised_plan_and_the_approved_version_show_who_decided(platform, settings) -> None:
    model = ScriptedModel(
        [proposes("Clean up", "Report"), proposes("Clean up only"), finish("Done.")]
    )
    async with on(platform, settings, model) as t:
        await t.mention("please clean up the build")
        first = t.message("📋 Plan (v1)")
        asks = ["Approve", "Reject", *(["Stop"] if platform == "discord" else [])]
        assert t.shown(first).buttons == asks  # Discord's card: and Stop

        await t.reply("skip the report", by="bob")
        second = t.message("📋 Plan (v2)")
        decided(f"✏️ Change asked by {t.name('bob')} (plan v1)", "📋 Plan (v1)\n1. Clean up")(
            t.shown(first)
        )
        assert t.shown(second).buttons == asks

        await t.approve_button(second, by="bob")
        done = "✅ " if platform == "discord" else ""  # Discord's card marks a step done
        decided(
            f"✅ Approved by {t.name('bob')} (plan v2)", f"📋 Plan (v2)\n{done}1. Clean up only"
        )(t.shown(second))
        assert t.posts()[-1].startswith("✅ Done.")

        snap = await t.snapshot()
        v1, v2 = _plans(snap)
        assert (v1.state, v1.verdict) == (RequestState.SUPERSEDED, Revised())
        assert (v2.state, v2.verdict) == (RequestState.DECIDED, Approved())
        assert v2.decided_by is not None and v2.decided_by.name == t.name("bob")
        assert await closing_rows(t.app) == [
            (v1.id, "sent", first, f"✏️ Change asked by {t.name('bob')} (plan v1)"),
            (v2.id, "sent", second, f"✅ Approved by {t.name('bob')} (plan v2)"),
        ]


@PLATFORMS
async def test_a_rejected_plan_shows_who_rejected_it_and_asks_what_to_change(
    platform, settings
) -> None:
    async with on(platform, settings, ScriptedModel([proposes("Clean up")])) as t:
        await t.mention("please clean up the build")
        plan_message = t.message("📋 Plan (v1)")

        await t.react(plan_message, False, by="alice")

        decided(f"❌ Rejected by {t.name('alice')} (plan v1)", "📋 Plan (v1)\n1. Clean up")(
            t.shown(plan_message)
        )
        assert t.posts()[-1].startswith("❓ What should change in plan v1?")
        snap = await t.snapshot()
        assert str(snap.status) == "waiting(question)"
        assert await closing_rows(t.app) == [
            (
                _plans(snap)[0].id,
                "sent",
                plan_message,
                f"❌ Rejected by {t.name('alice')} (plan v1)",
            )
        ]


@PLATFORMS
async def test_a_stopped_plan_shows_who_stopped_it(platform, settings) -> None:
    async with on(platform, settings, ScriptedModel([proposes("Clean up")])) as t:
        await t.mention("please clean up the build")
        plan_message = t.message("📋 Plan (v1)")

        await t.stop(by="alice")

        decided(f"⏹ Stopped by {t.name('alice')} (plan v1)", "📋 Plan (v1)\n1. Clean up")(
            t.shown(plan_message)
        )
        assert t.posts()[-1] == f"⏹ Stopped by {t.name('alice')}."
        snap = await t.snapshot()
        assert snap.status.lifecycle is Lifecycle.CANCELLED
        assert [r.state for r in snap.requests] == [RequestState.CANCELLED]
        assert [row[:3] for row in await closing_rows(t.app)] == [
            (snap.requests[0].id, "sent", plan_message)
        ]


@PLATFORMS
async def test_an_expired_plan_says_so_on_the_sweepers_clock(platform, settings) -> None:
    async with on(platform, settings, ScriptedModel([proposes("Clean up")])) as t:
        await t.mention("please clean up the build")
        plan_message = t.message("📋 Plan (v1)")
        now = datetime.now(UTC)

        t.app.sweeper._clock = lambda: now + timedelta(hours=24, minutes=1)
        assert await t.app.sweeper.sweep_once() == 1
        await t.settle()

        decided("⌛ Expired (plan v1)", "📋 Plan (v1)\n1. Clean up")(t.shown(plan_message))
        assert t.posts()[-1] == (
            "⌛ This request expired and the run stopped here; reply in this thread to start again."
        )
        snap = await t.snapshot()
        assert [r.state for r in snap.requests] == [RequestState.EXPIRED]
        assert [row[:3] for row in await closing_rows(t.app)] == [
            (snap.requests[0].id, "sent", plan_message)
        ]


@PLATFORMS
async def test_a_tool_approval_decided_call_by_call_shows_each_calls_outcome(
    platform, settings
) -> None:
    model = ScriptedModel([proposes("Clean up"), gated_pair(), finish("Done.")])
    settings.approval_scopes = ["once"]  # wider approvals: tests/test_approval_scopes.py
    async with on(platform, settings, model) as t:
        await t.mention("please clean up the build")
        await t.react(t.message("📋 Plan (v1)"), True, by="alice")
        approval = t.message("🔐 May I run these?")
        assert t.shown(approval).buttons == ["Allow 1", "Deny 1", "Allow 2", "Deny 2"]

        await t.decide_call(approval, 1, True, by="alice")
        assert t.shown(approval).buttons == ["Allow 1", "Deny 1", "Allow 2", "Deny 2"]
        await t.decide_call(approval, 2, False, by="bob")

        alice, bob = t.name("alice"), t.name("bob")
        shown = t.shown(approval)
        decided(
            f"✅ call 1 allowed by {alice} · ❌ call 2 denied by {bob}",
            "🔐 May I run these?\n1. `rm -rf build` — ",
        )(shown)
        assert "\n2. `git push origin main` — " in shown.text
        assert t.posts()[-1].startswith("✅ Done.")
        snap = await t.snapshot()
        [request] = [r for r in snap.requests if r.kind is RequestKind.TOOL_APPROVAL]
        assert request.state is RequestState.DECIDED
        assert await closing_rows(t.app) == [
            (
                _plans(snap)[0].id,
                "sent",
                t.message("📋 Plan (v1)"),
                f"✅ Approved by {alice} (plan v1)",
            ),
            (
                request.id,
                "sent",
                approval,
                f"✅ call 1 allowed by {alice} · ❌ call 2 denied by {bob}",
            ),
        ]


async def test_a_tool_approval_stopped_half_decided_shows_what_was_decided(settings) -> None:
    model = ScriptedModel([proposes("Clean up"), gated_pair(), finish("never")])
    async with on("console", settings, model) as t:
        await t.mention("please clean up the build")
        await t.react(t.message("📋 Plan (v1)"), True, by="alice")
        approval = t.message("🔐 May I run these?")
        await t.decide_call(approval, 1, True, by="bob")

        await t.stop(by="alice")

        decided(
            "⏹ Stopped by alice · ✅ call 1 allowed by bob · call 2 not decided",
            "🔐 May I run these?\n1. `rm -rf build` — ",
        )(t.shown(approval))
        assert t.posts()[-1].startswith("⏹ Stopped by alice.")
        snap = await t.snapshot()
        assert [r.state for r in snap.requests] == [RequestState.DECIDED, RequestState.CANCELLED]
