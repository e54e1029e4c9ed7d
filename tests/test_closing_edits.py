"""How a closed request's message is edited: the texts, the deliverer's part, the edges.

The outcome lines and the edited text are pure (``conversations.render``); the
deliverer finds the request's message in the outbox and edits it in order, or
settles the edit without a send when that message never arrived; a long message
keeps its outcome line when an adapter cuts it; the console prints the edit under
its id; a reaction after a per-call decision names both people.
"""

from __future__ import annotations

import logging

import pytest

from adapters.discord.outbound import MAX_TEXT
from adapters.discord.outbound import render as discord_render
from adapters.slack.outbound import render as slack_render
from conversations.closing import closed_message, outcome_line
from conversations.errors import DeliveryError
from conversations.events import PlanCard, PlanTask, PlatformRef, PostReply, UpdateMessage
from conversations.render import CLOSED, render_event
from core.context import CountingIds, ManualClock, RunContext
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.requests.common import Opening
from core.requests.plan_approval import open_plan
from core.tools import control
from core.tools.control import ProposePlan
from core.vocabulary import lifecycle
from core.vocabulary.errors import ModelError
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.vocabulary.requests import PendingRequest, PlanApproval, RequestKind, RequestState
from core.vocabulary.run_events import (
    CallOutcome,
    GatedCall,
    PlanProposed,
    RequestClosed,
    RunFailed,
    ToolApprovalRequested,
)
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.vocabulary.verdicts import Approved
from core.workflows import default_workflow
from tests import test_outbox
from tests.platform_threads import on
from tests.test_decided_messages import decided, gated_pair, proposes
from tests.test_slack_story import finish
from tests.test_story_console import run_console

THREAD = PlatformRef(platform="test", channel="c", thread="t")
make_bench = test_outbox.make_bench  # the deliverer's bench: a recording platform, a clock


def closing(**fields: object) -> RequestClosed:
    return RequestClosed.model_validate({"request_id": "r1", **fields})


def calls(*outcomes: tuple[str, str | None]) -> tuple[CallOutcome, ...]:
    return tuple(
        CallOutcome.model_validate({"number": n, "outcome": o, "by_name": by})
        for n, (o, by) in enumerate(outcomes, start=1)
    )


# --- the texts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (closing(request="plan", outcome="approved", by_name="Alice", plan_version=2),
         "✅ Approved by Alice (plan v2)"),
        (closing(request="plan", outcome="rejected", by_name="bob", plan_version=1),
         "❌ Rejected by bob (plan v1)"),
        (closing(request="plan", outcome="revised", by_name="bob", plan_version=1),
         "✏️ Change asked by bob (plan v1)"),
        (closing(request="plan", outcome="replaced", plan_version=2, replaced_by=3),
         "↻ Replaced by plan v3"),
        (closing(request="plan", outcome="stopped", by_name="alice", plan_version=1),
         "⏹ Stopped by alice (plan v1)"),
        (closing(request="plan", outcome="expired", plan_version=4), "⌛ Expired (plan v4)"),
        (closing(request="continue", outcome="approved", by_name="alice"),
         "▶️ Continued by alice"),
        (closing(request="continue", outcome="rejected", by_name="alice"),
         "⏹ Stopped here by alice"),
        (closing(request="retry", outcome="approved", by_name="alice"), "🔁 Retried by alice"),
        (closing(request="retry", outcome="rejected", by_name="alice"),
         "⏹ Not retried, stopped by alice"),
        (closing(request="tool_approval", outcome="decided",
                 calls=calls(("allowed", "alice"), ("allowed", "alice"))),
         "✅ Allowed by alice"),
        (closing(request="tool_approval", outcome="decided", calls=calls(("denied", "bob"),)),
         "❌ Denied by bob"),
        (closing(request="tool_approval", outcome="decided",
                 calls=calls(("allowed", "alice"), ("allowed", "bob"))),
         "✅ call 1 allowed by alice · ✅ call 2 allowed by bob"),
        (closing(request="tool_approval", outcome="expired",
                 calls=calls(("denied", "bob"), ("undecided", None))),
         "⌛ Expired · ❌ call 1 denied by bob · call 2 not decided"),
        (closing(request="tool_approval", outcome="stopped", by_name="alice",
                 calls=calls(("undecided", None), ("undecided", None))),
         "⏹ Stopped by alice"),
    ],
)  # fmt: skip
def test_the_outcome_line_says_what_became_of_the_request_and_who(
    event: RequestClosed, line: str
) -> None:
    assert outcome_line(event) == line
    [row] = render_event(THREAD, event)
    assert (row.purpose, row.request_id) == (CLOSED, "r1")
    assert row.action == UpdateMessage(ref=THREAD, text=line)


def test_the_edit_puts_the_outcome_first_cuts_the_hint_and_drops_the_buttons() -> None:
    plan = PlanProposed(request_id="r1", version=2, steps=("Clean up", "Report"))
    tools = ToolApprovalRequested(
        request_id="r2",
        calls=(GatedCall(number=1, tool="run_command", summary="`rm x`", reason="asks"),),
    )
    failed = RunFailed(error="The API is overloaded — try later\nstatus 529", request_id="r3")
    for event, title in (
        (plan, "📋 Plan (v2)\n1. Clean up\n2. Report"),
        (tools, "🔐 May I run this?\n1. `rm x` — asks"),
        (failed, "⚠️ The API is overloaded — try later\nstatus 529"),
    ):
        [row] = render_event(THREAD, event)
        original = row.action
        assert isinstance(original, PostReply) and original.buttons
        closing_row = UpdateMessage(ref=THREAD, text="✅ Approved by Alice")

        edit = closed_message(original, closing_row, "m7")

        assert edit.text == f"✅ Approved by Alice\n{title}"
        assert edit.buttons == ()
        assert edit.ref == THREAD.model_copy(update={"message": "m7"})


def test_a_long_message_keeps_its_outcome_line_when_an_adapter_cuts_the_edit() -> None:
    steps = tuple(f"Step {n}: " + "look closely at the fixture " * 8 for n in range(60))
    [row] = render_event(THREAD, PlanProposed(request_id="r1", version=1, steps=steps))
    assert isinstance(row.action, PostReply) and len(row.action.text) > 10_000
    edit = closed_message(row.action, UpdateMessage(ref=THREAD, text="✅ Approved by Alice"), "9")

    [update] = slack_render(edit, idempotency_key="tb-2")
    assert update.method == "chat.update" and update.args["ts"] == "9"
    assert update.args["text"].startswith("✅ Approved by Alice\n📋 Plan (v1)\n1. Step 0")
    assert update.args["text"].endswith("\n…") and len(update.args["text"]) <= 3_900
    assert {b["type"] for b in update.args["blocks"]} == {"section"}  # no actions block, no card
    [patch] = discord_render(edit, nonce="tb-2")
    assert patch.json is not None and patch.json["components"] == []
    assert patch.json["content"].startswith("✅ Approved by Alice\n📋 Plan (v1)\n")
    assert len(patch.json["content"]) <= MAX_TEXT


# --- the deliverer ----------------------------------------------------------------------


async def test_the_edit_goes_out_in_order_to_the_message_the_request_was_posted_as(
    make_bench,
) -> None:
    bench = await make_bench(mode="status")
    cid = await bench.conversation()
    plan = PlanProposed(request_id="r1", version=1, steps=("Clean up",))
    await bench.store.journal.commit(cid, Change(events=(plan,)))
    await bench.note(cid, "working")
    closed = closing(request="plan", outcome="approved", by_name="alice", plan_version=1)
    await bench.store.journal.commit(cid, Change(events=(closed,)))

    await bench.drain()

    posted, note, edit = bench.sender.sent
    assert isinstance(posted, PostReply) and posted.text.startswith("📋 Plan (v1)")
    assert isinstance(note, PostReply) and note.text.startswith("⏳ working")  # a status reply
    assert edit == UpdateMessage(
        ref=THREAD.model_copy(update={"message": "m1"}),
        text="✅ Approved by alice (plan v1)\n📋 Plan (v1)\n1. Clean up",
        plan=PlanCard(  # the card stays, its note the outcome
            title="Plan (v1)",
            version=1,
            tasks=(PlanTask(title="Clean up"),),
            note="✅ Approved by alice (plan v1)",
        ),
    )
    rows = [(purpose, state, message) for _, purpose, state, _, message, _ in await bench.rows()]
    assert rows == [("milestone", "sent", "m1"), ("note", "sent", "m2"), (CLOSED, "sent", "m1")]


async def test_an_edit_of_a_message_never_delivered_is_settled_without_a_send(
    make_bench, caplog
) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    bench.sender.refuse(
        DeliveryError("channel_not_found", permanent=True), when=test_outbox.says("📋")
    )
    plan = PlanProposed(request_id="r1", version=1, steps=("Clean up",))
    await bench.store.journal.commit(cid, Change(events=(plan,)))
    closed = closing(request="plan", outcome="stopped", by_name="alice", plan_version=1)
    await bench.store.journal.commit(cid, Change(events=(closed,)))
    await bench.answer(cid, "after it")

    with caplog.at_level(logging.INFO, logger="conversations.outbox"):
        await bench.drain()

    assert not any(isinstance(action, UpdateMessage) for action in bench.sender.sent)
    report, after = (t.split("\n")[0] for t in bench.sender.texts())  # the report in its place
    assert report.startswith("⚠️ I could not post a message here (“📋 Plan (v1)")
    assert report.endswith(": channel_not_found. Trying again cannot help, so I will not.")
    assert after == "✅ after it"
    rows = [(purpose, state) for _, purpose, state, *_ in await bench.rows()]
    assert rows[:3] == [("milestone", "failed"), (CLOSED, "dropped"), ("answer", "sent")]
    assert "nothing to edit" in caplog.text and "was not delivered (failed)" in caplog.text


# --- through the console's streams and the hub ---------------------------------------------


async def test_the_console_prints_the_approved_plan_again_marked_edited(make_app) -> None:
    app = await make_app(ScriptedModel([proposes("Clean up"), finish("Done.")]))

    transcript = await run_console(app, "clean up the build\n+✅ 2\n")

    lines = transcript.splitlines()
    edited = lines.index("  [2] ↳1 threadbot (edited): ✅ Approved by alice (plan v1)")
    assert lines[edited + 1 : edited + 3] == ["      📋 Plan (v1)", "      1. Clean up"]
    assert not lines[edited + 3].startswith("      [Approve]")
    assert "      [Approve] [Reject] (reactions: ✅ ❌)" in lines[:edited]  # the original had them


async def test_a_reaction_after_a_per_call_decision_decides_the_rest_and_names_both(
    settings,
) -> None:
    model = ScriptedModel([proposes("Clean up"), gated_pair(), finish("Done.")])
    async with on("console", settings, model) as t:
        await t.mention("please clean up the build")
        await t.react(t.message("📋 Plan (v1)"), True, by="alice")
        approval = t.message("🔐 May I run these?")
        await t.decide_call(approval, 2, False, by="bob")

        await t.react(approval, True, by="alice")  # every call still undecided: call 1

        decided(
            "✅ call 1 allowed by alice · ❌ call 2 denied by bob",
            "🔐 May I run these?\n1. `rm -rf build` — ",
        )(t.shown(approval))


async def test_go_on_and_stop_here_show_on_the_turn_cap_messages(settings) -> None:
    settings.step_turn_limit = 2
    looping = [ScriptedTurn(calls=[ScriptedCall("list_files", {})]) for _ in range(4)]
    model = ScriptedModel([proposes("Clean up"), *looping, ScriptedTurn(text="never")])
    async with on("console", settings, model) as t:
        await t.mention("please clean up the build")
        await t.react(t.message("📋 Plan (v1)"), True, by="alice")
        first = t.message("⏸ I've used 2 model turns")

        await t.react(first, True, by="alice")
        second = t.message("⏸ I've used 2 model turns")
        await t.react(second, False, by="alice")

        title = (
            "⏸ I've used 2 model turns in the executing step without finishing (its turn cap: 2)"
        )
        decided("▶️ Continued by alice", title)(t.shown(first))
        decided("⏹ Stopped here by alice", title)(t.shown(second))
        assert t.shown(second).text == f"⏹ Stopped here by alice\n{title}"
        assert t.posts()[-1] == "⏹ Stopped by alice."


async def test_a_retry_asked_in_words_shows_on_the_failure_message(settings) -> None:
    failing = ScriptedTurn(error=ModelError("The model API is overloaded"))
    model = ScriptedModel([proposes("Clean up"), failing, finish("Back at it.")])
    async with on("console", settings, model) as t:
        await t.mention("please clean up the build")
        await t.react(t.message("📋 Plan (v1)"), True, by="alice")
        failure = t.message("⚠️ The model API is overloaded")
        assert "react :repeat:" in t.shown(failure).text

        await t.reply("retry", by="alice")

        assert t.shown(failure).text == "🔁 Retried by alice\n⚠️ The model API is overloaded"
        assert t.posts()[-1].startswith("✅ Back at it.")
        snap = await t.snapshot()
        [retry] = [r for r in snap.requests if r.kind is RequestKind.RETRY]
        assert (retry.state, retry.verdict) == (RequestState.DECIDED, Approved())


# --- a plan replaced while open -------------------------------------------------------------


def test_a_new_plan_replaces_an_open_one_and_leaves_a_decided_ones_message_alone() -> None:
    def snapshot(*requests: PendingRequest) -> ConversationSnapshot:
        return ConversationSnapshot(
            id="c1",
            requester=Person(id="u", name="alice"),
            status=lifecycle.RUNNING,
            position="planning",
            plan_version=2,
            workspace="/nowhere",
            journal=(),
            tool_calls={},
            requests=requests,
        )

    record = ToolCallRecord(
        tool_use_id="tu3",
        name="propose_plan",
        input={"steps": ["Clean up only"]},
        read_only=True,
        state=ToolState.RUNNING,
        turn_seq=5,
        index=0,
    )
    approved = PlanApproval(id="p1", tool_use_id="tu1", plan_version=1, state=RequestState.DECIDED)
    still_open = PlanApproval(id="p2", tool_use_id="tu2", plan_version=2)
    snap = snapshot(approved, still_open)

    opening = Opening(context=RunContext(clock=ManualClock(), ids=CountingIds("new")), ttl=60)
    plan = control.parse(record.name, record.input)
    assert isinstance(plan, ProposePlan)
    change = open_plan(snap, record, plan, default_workflow(), opening)

    closed = [e for e in change.events if isinstance(e, RequestClosed)]
    assert closed == [
        RequestClosed(
            request_id="p2", request="plan", outcome="replaced", plan_version=2, replaced_by=3
        )
    ]
    assert {r.request_id for r in change.resolve} == {"p1", "p2"}  # both superseded
    assert outcome_line(closed[0]) == "↻ Replaced by plan v3"
