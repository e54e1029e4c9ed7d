"""Budgets (issue 15, acceptance 4): reaching one pauses the run with a continue request.

Through the hub, with the scripted model (every call is 100 input and 20 output
tokens: 120) or the real Anthropic model against the local Messages API fake
(token counts of every kind, costed from a price sheet). A conversation's token
budget is reached after some tool calls: the run waits (``waiting(continue)``) on
an open budget request, the thread says what was spent, and no model call is
made. A bystander's raise (reaction or reply) is refused; the requester's or an
approver's raise is recorded (a decision by them), the closed message says who
raised it, and the run goes on until twice the budget. A dollar budget counts the
cost from the prices; a channel's daily budget is shared by the conversations of
its channel (Slack, a channel layer) and no other's; "stop here" cancels; a dollar
budget without a price for a model the bot may call is a settings error naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bot.settings import DEFAULT_MODEL, Settings
from bot.settings_errors import explain
from conversations.events import ButtonPressed
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.pricing import Budgets, Limit
from core.run.settings import EngineSettings
from core.vocabulary.entries import AssistantTurn, DecisionEntry
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import ContinueRequest, RequestState
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from core.vocabulary.verdicts import Approved
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply, tool_use
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.slack_harness import ALICE, CHANNEL, slack_workspace
from tests.test_cache_prefix import running
from tests.test_settings_layers import OTHER, layered, mention_in, posted, react_in

REFUSED = "Only the requester or an approver can decide this, {}."
PLAN = ScriptedCall("propose_plan", {"steps": ["Look around", "Report"]})


def finished(answer: str = "Looked.") -> ScriptedTurn:
    """The model ends the run with ``answer`` (a ``finish`` call)."""
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def looking(n: int) -> list[ScriptedTurn]:
    """``n`` turns that each list the workspace (each call spends 120 tokens)."""
    return [ScriptedTurn(calls=[ScriptedCall("list_files", {"path": "."})]) for _ in range(n)]


async def approved(make_app, turns: list[ScriptedTurn]) -> tuple[Chat, ScriptedModel]:
    """Alice asks, the plan (one call) is approved, and ``turns`` play on."""
    model = ScriptedModel([ScriptedTurn(calls=[PLAN]), *turns])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("look around and report")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    return chat, model


async def press(chat: Chat, message: str, action: str, *, by: str) -> None:
    """``by`` presses the button of ``action`` (``approve:<request id>``) under ``message``."""
    await chat.app.hub.handle(
        ButtonPressed(
            delivery_key=f"b-{action}-{by}",
            ref=chat._ref(message, by),
            author=chat.person(by),
            action=action,
        )
    )
    await chat.app.hub.settled()


def budget_requests(snap: ConversationSnapshot) -> list[ContinueRequest]:
    return [r for r in snap.requests if isinstance(r, ContinueRequest) and r.budget is not None]


def raised_by(snap: ConversationSnapshot) -> list[str]:
    """The ids of who approved the budget requests, as the journal records them."""
    ids = {r.id for r in budget_requests(snap)}
    return [
        r.entry.by.id
        for r in snap.journal
        if isinstance(r.entry, DecisionEntry)
        and r.entry.request_id in ids
        and isinstance(r.entry.verdict, Approved)
    ]


async def assert_paused(chat: Chat, model: ScriptedModel, calls: int, budget: str) -> None:
    """Waiting on one open conversation budget request after ``calls`` model calls."""
    snap = await chat.snapshot()
    assert str(snap.status) == "waiting(continue)"
    assert snap.status.lifecycle is Lifecycle.WAITING
    (request,) = [r for r in budget_requests(snap) if r.state is RequestState.OPEN]
    assert request.budget == "conversation"
    assert len(model.requests) == calls
    spent = f"{calls * 120} tokens"  # no price: no cost said
    assert chat.said()[-1] == (
        f"💰 This conversation has spent {spent}, reaching its budget of {budget} — the "
        "requester or an approver may react :white_check_mark: or press Raise budget to "
        "allow another 300 tokens and go on, :x: to stop here."
    )
    assert "[Raise budget] [Stop here]" in chat.out.getvalue()


# --- a conversation's token budget ----------------------------------------------------


async def test_a_budget_pauses_mid_run_a_bystander_cannot_raise_and_the_requester_can(
    settings, make_app
) -> None:
    settings.conversation_budget_tokens = 300
    chat, model = await approved(make_app, [*looking(5), finished()])
    # The plan and two tool turns spent 360 tokens: the fourth call is not made.
    await assert_paused(chat, model, 3, "300 tokens")
    snap = await chat.snapshot()
    assert [r.state for r in snap.tool_calls.values()] == [ToolState.DONE] * 3  # plan, 2 lists

    (request,) = budget_requests(snap)
    await chat.react(chat.bot_message("💰"), by="mallory")
    await chat.reply("raise it and go on", by="mallory")
    await press(chat, chat.bot_message("💰"), f"approve:{request.id}", by="mallory")  # Raise
    assert chat.said()[-3:] == [REFUSED.format("mallory")] * 3
    snap = await chat.snapshot()
    assert str(snap.status) == "waiting(continue)"
    assert [r.state for r in budget_requests(snap)] == [RequestState.OPEN]
    assert raised_by(snap) == []
    assert len(model.requests) == 3

    await chat.react(chat.bot_message("💰"))  # alice, the requester
    await chat.app.hub.settled()
    assert "threadbot (edited): 💰 Budget raised by alice" in chat.out.getvalue()
    # Each raise adds one budget: two more calls make 600 tokens, and it asks again.
    await assert_paused(chat, model, 5, "600 tokens")
    snap = await chat.snapshot()
    assert [r.state for r in budget_requests(snap)] == [RequestState.DECIDED, RequestState.OPEN]
    assert raised_by(snap) == ["console:alice"]


async def test_a_reply_never_raises_a_budget_and_an_approver_s_reaction_does(
    settings, make_app
) -> None:
    settings.conversation_budget_tokens = 300
    settings.approvers = ["carol"]
    chat, model = await approved(make_app, [*looking(2), finished()])
    await assert_paused(chat, model, 3, "300 tokens")

    await chat.reply("no, do not raise it", by="alice")  # the requester, in words
    await chat.app.hub.settled()
    assert chat.said()[-1] == (
        "A reply does not raise a budget, alice: react :white_check_mark: or press "
        "Raise budget to raise it, :x: to stop here."
    )
    snap = await chat.snapshot()
    assert str(snap.status) == "waiting(continue)" and raised_by(snap) == []
    assert len(model.requests) == 3

    await chat.react(chat.bot_message("💰"), by="carol")  # an approver
    await chat.app.hub.settled()

    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE, chat.out.getvalue()
    assert chat.said()[-1].startswith("✅ Looked.")
    assert "💰 Budget raised by carol" in chat.out.getvalue()
    assert raised_by(snap) == ["console:carol"]
    assert len(model.requests) == 4


async def test_stop_here_ends_the_conversation_cancelled(settings, make_app) -> None:
    settings.conversation_budget_tokens = 300
    chat, model = await approved(make_app, looking(3))
    await assert_paused(chat, model, 3, "300 tokens")

    await chat.react(chat.bot_message("💰"), "x")
    await chat.app.hub.settled()

    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert "threadbot (edited): ⏹ Stopped here by alice" in chat.out.getvalue()
    assert chat.said()[-1] == "⏹ Stopped by alice."
    assert raised_by(snap) == []
    assert len(model.requests) == 3


# --- money --------------------------------------------------------------------------

PRICES = {"claude-test": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}
"""Dollars per million tokens: a call below costs 3,000 + 7,500 + 6,000 + 7,500 µ$."""


def priced(blocks: list[dict[str, Any]]) -> Reply:
    return Reply(
        blocks,
        input_tokens=1_000,
        output_tokens=500,
        cache_read_input_tokens=20_000,
        cache_creation_input_tokens=2_000,
    )


async def test_a_dollar_budget_counts_the_cost_from_the_price_sheet(sqlite_settings) -> None:
    s = layered(sqlite_settings, model="claude-test", conversation_budget_usd=0.05, prices=PRICES)
    script = [
        priced([tool_use("toolu_01", "propose_plan", {"steps": ["Look", "Report"]})]),
        priced([tool_use("toolu_02", "list_files", {})]),
        priced([tool_use("toolu_03", "list_files", {})]),
        priced([tool_use("toolu_04", "finish", {"answer": "Looked."})]),
    ]
    async with FakeAnthropicServer(script) as server, running(s, server) as app:
        chat = Chat(app)
        await chat.mention("look around and report")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()

        # Two calls cost $0.048, under $0.05; the third makes $0.072 and the fourth waits.
        assert len(server.requests) == 3
        assert chat.said()[-1].startswith(
            "💰 This conversation has spent 70.5k tokens ($0.07), reaching its budget of $0.05"
            " — the requester or an approver may react :white_check_mark: or press Raise "
            "budget to allow another $0.05 and go on"
        )
        snap = await chat.snapshot()
        costs = [r.entry.usage for r in snap.journal if isinstance(r.entry, AssistantTurn)]
        assert [u.cost_micro_usd if u else None for u in costs] == [24_000] * 3
        (line,) = await app.store.usage.report("conversation")
        assert (line.calls, line.tokens, line.cost_micro_usd) == (3, 70_500, 72_000)

        await chat.react(chat.bot_message("💰"))
        await app.hub.settled()
        assert chat.said()[-1].startswith("✅ Looked.")
        assert "💰 Budget raised by alice" in chat.out.getvalue()
        assert "· 94.0k tokens (86% from cache) · $0.10" in chat.out.getvalue()  # the footer
        assert len(server.requests) == 4
        (line,) = await app.store.usage.report("conversation")
        assert line.cost_micro_usd == 96_000


# --- a channel's daily budget -----------------------------------------------------------


async def test_a_channel_s_daily_budget_is_shared_by_its_conversations_only(
    sqlite_settings,
) -> None:
    """Both channels have a daily budget of 240 tokens (two calls) in their layer."""
    daily = {"channel_daily_budget_tokens": 240}
    s = layered(sqlite_settings, slack={TEAM_ID: {"channels": {CHANNEL: daily, OTHER: daily}}})
    plan = ScriptedTurn(calls=[PLAN])
    done = finished()
    model = ScriptedModel([plan, done, ScriptedTurn(calls=[PLAN]), ScriptedTurn(calls=[PLAN])])
    async with slack_workspace(s, model) as ws:
        first = await mention_in(ws, CHANNEL, "look around")
        await react_in(ws, CHANNEL, posted(ws, CHANNEL, first, "📋 Plan")["ts"], by=ALICE)
        assert (await ws.snapshot(first)).status.lifecycle is Lifecycle.DONE
        assert len(model.requests) == 2

        # The channel has spent its 240 tokens today: a new conversation asks first.
        second = await mention_in(ws, CHANNEL, "look again")
        snap = await ws.snapshot(second)
        assert str(snap.status) == "waiting(continue)"
        assert [r.budget for r in budget_requests(snap)] == ["channel_day"]
        assert len(model.requests) == 2
        assert posted(ws, CHANNEL, second, "💰")["text"].startswith(
            "💰 This channel has spent 240 tokens, reaching its daily budget of 240 tokens"
        )

        # The other channel has spent nothing of its own budget today.
        other = await mention_in(ws, OTHER, "look around there")
        assert str((await ws.snapshot(other, OTHER)).status) == "waiting(plan_approval)"
        assert len(model.requests) == 3

        # Alice raises it for her second conversation: 480 tokens, so its plan call is made.
        await react_in(ws, CHANNEL, posted(ws, CHANNEL, second, "💰")["ts"], by=ALICE)
        snap = await ws.snapshot(second)
        assert str(snap.status) == "waiting(plan_approval)"
        assert raised_by(snap) == [ALICE]
        raised = posted(ws, CHANNEL, second, "Budget raised")["text"]
        assert raised.startswith(f"💰 Budget raised by <@{ALICE}>\n"), raised
        assert len(model.requests) == 4


# --- settings -------------------------------------------------------------------------


PRICED = '[prices."claude-test"]\ninput = 3\noutput = 15\ncache_read = 0.3\ncache_write = 3.75\n'
DOCS = f"[slack.{TEAM_ID}.channels.{OTHER}]\n"


def settings_from(toml: str) -> Settings:
    """The settings of a ``threadbot.toml`` (in the test's working directory)."""
    Path("threadbot.toml").write_text(toml, encoding="utf-8")
    return Settings()


def refused(toml: str) -> list[str]:
    """What a person is told about a ``threadbot.toml`` that is refused."""
    with pytest.raises(ValidationError) as raised:
        settings_from(toml)
    return explain(raised.value, fields=Settings.model_fields, environ={}, toml_file=Path("x"))


def test_a_dollar_budget_needs_a_price_for_every_model_it_may_apply_to(settings) -> None:
    hint = '(add [prices."<model>"] with input, output, cache_read and cache_write)'
    # The bot's budget, a channel's own models without a price ...
    toml = f'model = "claude-test"\nconversation_budget_usd = 5\n{PRICED}{DOCS}'
    toml += 'model = "claude-for-docs"\nfallback_models = ["claude-spare"]\n'
    assert refused(toml) == [
        "threadbot settings: a budget in dollars needs a price for every model; none for "
        f"['claude-for-docs', 'claude-spare'] {hint}"
    ]
    # ... or a channel's budget, the bot's model without one.
    assert refused(f"{DOCS}channel_daily_budget_usd = 20\n") == [
        "threadbot settings: a budget in dollars needs a price for every model; none for "
        f"['{DEFAULT_MODEL}'] {hint}"
    ]
    # Every model priced: the channel's budget is in micro-dollars, the others' has none.
    layers = settings_from(
        f'model = "claude-test"\n{PRICED}{DOCS}channel_daily_budget_usd = 20.5\n'
    ).layers()
    docs = layers.at("slack", TEAM_ID, OTHER).engine_settings(EngineSettings())
    assert docs.budgets == Budgets(channel_day=Limit(micro_usd=20_500_000))
    builds = layers.at("slack", TEAM_ID, CHANNEL).engine_settings(EngineSettings())
    assert builds.budgets == Budgets()
