"""A conversation's timeline as the inspector reads it, from journals real runs made.

The console story (a plan approved with a reaction, a command, a question answered, the
answer) and a stop and a large output through the hub: what the timeline holds, who
acted and how, each call's state and output, the header's totals; and a follower that
sees what a run commits after it started (conversations/inspect).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from bot.app import App
from bot.inspector.web import Inspector
from conversations.events import PlatformRef
from conversations.inspect import timeline
from conversations.inspect.follow import Follow
from conversations.inspect.items import Decision, Message, ModelTurn, Note, Stop, ToolResult
from conversations.inspect.outputs import PAGE, output_page
from conversations.store.audit import AuditEntry
from conversations.store.records import ConversationInfo
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.secrets import Redactor
from core.vocabulary.approvals import ApprovalScope, CallPattern, RuleApplied
from core.vocabulary.entries import (
    AssistantTurn,
    Compacted,
    ContextNote,
    DecisionEntry,
    Delegated,
    DelegationBrief,
    DelegationChecked,
    DelegationEnded,
    Escalated,
    ExpertConsulted,
    FailedCall,
    FailuresReset,
    ForkedFrom,
    JournalRecord,
    ModelUsage,
    Nudged,
    ScopeEntered,
    ScopeLeft,
    StepEntered,
    StopEntry,
    ToolAttempt,
    ToolCall,
    ToolResultEntry,
    UserText,
    WorkflowChosen,
)
from core.vocabulary.lifecycle import Lifecycle, Status, WaitKind
from core.vocabulary.people import Person
from core.vocabulary.requests import Question
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.vocabulary.verdicts import CallsDecided, Denied
from tests.harness import Chat
from tests.test_story_console import only_conversation, run_console, story_script


async def story(make_app) -> tuple[App, str]:
    app = await make_app(ScriptedModel(story_script()))
    await run_console(app, "the login test is flaky, fix it\n+✅ 2\n>1 one per test\n")
    return app, await only_conversation(app)


async def test_the_story_s_timeline_holds_each_entry_with_who_how_and_what_it_cost(
    make_app,
) -> None:
    app, cid = await story(make_app)

    found = await timeline.read(app.store, cid)

    assert found is not None
    snap = await app.store.journal.load(cid)
    assert [i.seq for i in found.items] == [r.seq for r in snap.journal]  # every entry shown
    kinds = [getattr(i, "entry", i.kind) for i in found.items]
    assert kinds[:4] == ["workflow_chosen", "step_entered", "message", "model_turn"]
    request = next(i for i in found.items if isinstance(i, Message))
    assert (request.who, request.role) == ("console:alice", "request")
    assert request.text == "the login test is flaky, fix it"
    plan = next(i for i in found.items if isinstance(i, ModelTurn))
    assert plan.calls[0].steps == ("Run the login tests", "Fix the fixture")
    assert plan.calls[0].version == 1 and plan.settled
    assert plan.spent is not None and plan.spent.input_tokens == 100
    decision = next(i for i in found.items if isinstance(i, Decision))
    assert (decision.who, decision.means, decision.verdict) == (
        "console:alice",
        "reaction",
        "approved",
    )
    assert (decision.request_kind, decision.version) == ("plan_approval", 1)
    command = next(i for i in found.items if isinstance(i, ToolResult) and i.name == "run_command")
    assert command.state is ToolState.DONE and "3 failed" in command.output
    assert '"command": "echo 3 failed"' in command.arguments
    assert command.seconds is not None and command.seconds >= 0 and not command.more
    answer = next(i for i in found.items if isinstance(i, Message) and i.role == "answer")
    assert answer.text == "one per test"
    entered = [i.title for i in found.items if isinstance(i, Note) and i.entry == "step_entered"]
    assert entered == [
        "Entered planning",
        "Entered approval",
        "Entered executing",
        "Entered answered",
    ]
    head = found.header
    assert (head.platform, head.channel, head.requester) == ("console", "console", "console:alice")
    assert (head.lifecycle, head.workflow, head.position) == ("done", "default", "answered")
    assert head.model_calls == 5 and head.input_tokens == 500 and head.output_tokens == 100
    assert head.in_flight == () and head.waiting == ()
    assert head.last_seq == snap.last_seq
    # opened, then ended, as the list says it (its creation, its last change)
    info = await app.store.threads.info(cid)
    assert (head.started, head.ended) == (info.created_at, info.changed_at)
    assert head.started is not None and head.started <= snap.journal[0].at
    assert head.duration(datetime.now(UTC)) == info.changed_at - info.created_at
    assert head.cost_micro_usd is None and head.unpriced == 5  # no price: not known, not $0


async def test_a_large_output_shows_its_first_page_and_pages_whole_from_the_output_store(
    make_app,
) -> None:
    whole = "".join(f"{n:05d}|" for n in range(8_334))[:50_000]  # every stretch different
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Read it"]})]),
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "big", "content": whole})]),
            ScriptedTurn(calls=[ScriptedCall("read_file", {"path": "big"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Read it."})]),
        ]
    )
    app = await make_app(model)
    chat = Chat(app)
    await chat.mention("read big")
    await chat.react(chat.bot_message("Plan"))
    await app.hub.settled()
    cid = (await app.store.threads.conversations())[0].id
    found = await timeline.read(app.store, cid)
    assert found is not None
    result = next(i for i in found.items if isinstance(i, ToolResult) and i.name == "read_file")
    assert result.output_id is not None and result.more
    assert result.output == whole[: len(result.output)]  # the preview's head, as the model read it

    first = await output_page(app.store, cid, result.call_id)
    assert first is not None and first.whole and first.total == len(whole)
    assert first.text == whole[:PAGE] and first.next_offset == PAGE
    assert first.previous_offset is None
    last = await output_page(app.store, cid, result.call_id, offset=PAGE * 2)
    assert last is not None and last.text == whole[PAGE * 2 : PAGE * 3]
    assert await output_page(app.store, cid, "toolu_none") is None
    assert await output_page(app.store, "0" * 32, result.call_id) is None


async def test_a_stop_names_who_stopped_it_and_by_what_means(make_app) -> None:
    model = ScriptedModel(story_script()[:1])
    app = await make_app(model)
    chat = Chat(app)
    await chat.mention("fix it")
    await chat.stop()
    await app.hub.settled()
    cid = (await app.store.threads.conversations())[0].id

    found = await timeline.read(app.store, cid)

    assert found is not None
    stop = next(i for i in found.items if isinstance(i, Stop))
    assert (stop.who, stop.means) == ("console:alice", "command")
    assert found.header.lifecycle == "cancelled"


async def test_a_follower_sees_what_is_committed_after_it_started(make_app) -> None:
    app = await make_app(ScriptedModel(story_script()))
    chat = Chat(app)
    await chat.mention("the login test is flaky, fix it")
    cid = (await app.store.threads.conversations())[0].id
    before = await timeline.read(app.store, cid)
    assert before is not None and before.header.status == "waiting(plan_approval)"
    assert [w.kind for w in before.header.waiting] == ["plan_approval"]
    follow = Follow(app.store, cid, after=before.header.last_seq, poll=0.05)
    updates = follow.updates()

    first = await anext(updates)
    assert first.header == before.header  # the header first, and no new item, only
    (plan,) = first.items  # the one the reader has that may still change: its plan waits
    assert isinstance(plan, ModelTurn) and not plan.settled and plan.calls[0].version == 1

    await chat.react(chat.bot_message("Plan"))
    seen = []
    while not any(isinstance(i, Decision) for s in seen for i in s.items):
        seen.append(await anext(updates))
    new = [i for s in seen for i in s.items]
    again = [i for i in new if i.seq <= before.header.last_seq]
    assert [i.seq for i in again] == [plan.seq]  # the plan's turn, shown again: it changed
    assert isinstance(again[0], ModelTurn) and again[0].settled and again[0].calls[0].answered
    later = [i.seq for i in new if i.seq > before.header.last_seq]
    assert later == sorted(later) and later[0] == before.header.last_seq + 1
    assert next(i for i in new if isinstance(i, Decision)).means == "reaction"
    follow.stop()
    assert [s async for s in updates] == []  # ended at its next wait


def every_kind() -> tuple[ConversationInfo, ConversationSnapshot, list[AuditEntry]]:
    """A conversation whose journal holds an entry of every kind, calls in every state a
    page marks, one still running, and a request open (the timeline of a long, stuck run)."""
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    bob = Person(id="U0BOB", name="Bob")
    usage = ModelUsage(
        model="m", input_tokens=100, output_tokens=20, cache_read_tokens=300, cost_micro_usd=900
    )
    calls = [
        ToolCall(id=f"toolu_{n}", name="run_command", input={"command": f"c{n}"}) for n in range(5)
    ]
    failed = (FailedCall(tool_use_id="toolu_1", tool="run_command", call="c1", output="boom"),)
    pattern = CallPattern(tool="run_command", command_prefix="make")
    entries = [
        WorkflowChosen(name="default", definition="{}"),
        StepEntered(position="executing", instructions="Carry it out."),
        UserText(author=bob, text="go"),
        AssistantTurn(text="on it", tool_calls=tuple(calls), usage=usage),
        DecisionEntry(request_id="r1", verdict=CallsDecided(calls={"toolu_0": Denied()}), by=bob),
        ToolResultEntry(tool_use_id="toolu_0", content="denied by U0BOB", is_error=True),
        RuleApplied(
            tool_use_id="toolu_1", rule_id=7, scope=ApprovalScope.RUN, pattern=pattern, by=bob
        ),
        ToolAttempt(tool_use_id="toolu_1", attempt=1, error="flaky", delay_seconds=2),
        ToolResultEntry(tool_use_id="toolu_1", content="interrupted: partial"),
        ToolResultEntry(tool_use_id="toolu_2", content="unknown: found running after a restart"),
        ToolResultEntry(tool_use_id="toolu_3", content="cancelled"),
        ContextNote(strategy="task_list", text="1. [x] step one", lifetime_turns=3, task="1"),
        ScopeEntered(scope="delegation-1", task="fix it", role="expert"),
        Delegated(n=1, model="big", branch="threadbot/c-delegation-1", failures=failed),
        DelegationBrief(n=1, text="the plan"),
        DelegationChecked(n=1, command="make test", passed=False, output="1 failed"),
        DelegationEnded(n=1, outcome="not_usable", why="still failing"),
        ScopeLeft(scope="delegation-1", outcome="not_usable"),
        Escalated(request_id="r2", failures=failed),
        FailuresReset(request_id="r2", by=bob),
        ForkedFrom(conversation="f" * 32, at=2, by="dana"),  # (copied: nothing priced)
        ExpertConsulted(tool_use_id="toolu_x", question="why?", usage=usage),
        Nudged(why="prose", text="Call a tool."),
        Compacted(summary="so far: one step", through_seq=3, usage=usage),
        StopEntry(by=bob),
    ]
    journal = tuple(
        JournalRecord(seq=n, at=t0 + timedelta(seconds=n), entry=e)
        for n, e in enumerate(entries, 1)
    )
    states = [
        ToolState.DENIED,
        ToolState.INTERRUPTED,
        ToolState.UNKNOWN,
        ToolState.CANCELLED,
        ToolState.RUNNING,
    ]
    records = {
        c.id: ToolCallRecord(
            tool_use_id=c.id,
            name=c.name,
            input=c.input,
            read_only=False,
            state=states[n],
            turn_seq=4,
            index=n,
        )
        for n, c in enumerate(calls)
    }
    status = Status(lifecycle=Lifecycle.WAITING, wait=WaitKind.QUESTION)
    info = ConversationInfo(
        id="c" * 32,
        binding=PlatformRef(platform="slack", workspace="T1", channel="C1", thread="1.0"),
        requester=bob,
        status=status,
        changed_at=journal[-1].at,
        created_at=t0,
    )
    snap = ConversationSnapshot(
        id="c" * 32,
        requester=bob,
        status=status,
        position="executing",
        plan_version=0,
        workspace="workspaces/c",
        journal=journal,
        tool_calls=records,
        requests=(Question(id="r3", tool_use_id="toolu_q", prompt="Which one?"),),
    )
    row = AuditEntry(
        id=1,
        at=journal[4].at,
        conversation_id=info.id,
        platform="slack",
        workspace="T1",
        channel="C1",
        request_kind="tool_approval",
        request_id="r1",
        version=None,
        user_id="U0BOB",
        means="button",
        outcome="denied",
        reason="",
    )
    stop_row = dataclasses.replace(
        row,
        id=2,
        at=journal[-1].at,
        request_kind="stop",
        request_id=None,
        means="native_stop",
        outcome="stopped",
    )
    return info, snap, [row, stop_row]


def test_every_entry_kind_has_its_item_and_the_marked_states_are_marked() -> None:
    info, snap, rows = every_kind()

    found = timeline.build(info, snap, rows)

    kinds = [getattr(i, "entry", i.kind) for i in found.items]
    assert kinds == [
        "workflow_chosen", "step_entered", "message", "model_turn", "decision", "tool_result",
        "rule_applied", "tool_attempt", "tool_result", "tool_result", "tool_result",
        "context_note", "scope_entered", "delegated", "delegation_brief", "delegation_checked",
        "delegation_ended", "scope_left", "escalated", "failures_reset", "forked_from",
        "expert_consulted", "nudged", "compacted", "stop",
    ]  # fmt: skip
    results = [i for i in found.items if isinstance(i, ToolResult)]
    assert [(r.state, r.marked) for r in results] == [
        (ToolState.DENIED, True),
        (ToolState.INTERRUPTED, True),
        (ToolState.UNKNOWN, True),
        (ToolState.CANCELLED, True),
    ]
    assert results[0].seconds == 1.0  # from its denial, not its turn
    assert results[1].seconds == 2.0 and results[1].attempts == 2  # from the rule's approval
    (decision,) = [i for i in found.items if isinstance(i, Decision)]
    assert decision.calls == (("run_command", "denied"),) and decision.means == "button"
    (stop,) = [i for i in found.items if isinstance(i, Stop)]
    assert stop.means == "native_stop"
    turn = next(i for i in found.items if isinstance(i, ModelTurn))
    assert turn.spent is not None and turn.spent.cache_share == 0.75  # 300 of 400 input
    assert not turn.settled  # its last call still runs
    head = found.header
    assert [(c.call_id, c.state) for c in head.in_flight] == [("toolu_4", ToolState.RUNNING)]
    assert [(w.kind, w.prompt) for w in head.waiting] == [("question", "Which one?")]
    assert head.model_calls == 3 and head.cost_micro_usd == 2_700 and head.unpriced == 0
    assert head.cache_share == 0.75 and head.ended is None  # it waits: to now
    assert head.duration(datetime(2026, 1, 5, 9, 1, tzinfo=UTC)) == timedelta(minutes=1)
    assert head.origin is not None and (head.origin.conversation, head.origin.at) == ("f" * 32, 2)


async def test_a_question_without_its_answer_is_shown_waiting_for_it_not_approved(
    make_app, settings
) -> None:
    app = await make_app(ScriptedModel(story_script()))
    await run_console(app, "the login test is flaky, fix it\n+✅ 2\n")  # no answer given
    cid = await only_conversation(app)

    found = await timeline.read(app.store, cid)

    assert found is not None and found.header.status == "waiting(question)"
    (asked,) = found.header.in_flight
    assert (asked.name, asked.state) == ("ask_user", ToolState.APPROVED)  # its record's
    assert asked.waiting == "waiting for an answer"  # what is shown
    (turn,) = [i for i in found.items if isinstance(i, ModelTurn) and i.calls[0].name == "ask_user"]
    assert turn.calls[0].waiting == "waiting for an answer"
    inspector = Inspector(
        store=app.store, settings=settings, redactor=Redactor(), clock=lambda: datetime.now(UTC)
    )
    header = inspector.page(None, "conversation_header.html", header=found.header)
    shown = inspector.page(None, "timeline_item.html", item=turn, cid=cid)
    for html in (header, shown):
        assert '<span class="state state-waiting">waiting for an answer</span>' in html
        assert "approved" not in html
