"""Refusals and nudges decided outside the model (issue 28): an early finish, a reply in prose.

The scripted model finishes before the change its approved plan asks for, or replies
in prose where a tool call is due; threadbot, not the model, refuses the finish or
nudges it once (a journaled entry, a progress note in the thread, a span), and a
second time asks the people in the thread (``🆘 I'm stuck: ...``, what went wrong
attached), whose answer is the model's next instruction. Asserted where a person and
the store see it: the thread (console harness, Slack fake), the journal, the tool
call records, the model's next request and the spans.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import core.run.escalation as escalation
from bot.app import build
from bot.settings import Settings
from core import tracing
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedRoles, ScriptedTurn
from core.run.compose import Outcome
from core.vocabulary.entries import DelegationEnded, Escalated, FailuresReset, Nudged
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import Escalation
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from tests.harness import Chat
from tests.slack_harness import BOB, slack_workspace
from tests.test_escalation import approved, done, run, started, texts_of
from tests.test_traces import Spans

FAILS = "echo 'error: missing header foo.h' >&2; exit 2"
EARLY = "🆘 I'm stuck: I tried to finish twice without making the change the plan asks for"
PROSE = "🆘 I'm stuck: my last 2 replies neither finished the work nor went on with it"


async def ran(
    settings: Settings, model: ScriptedModel | ScriptedRoles, **kwargs: Any
) -> tuple[ConversationSnapshot, Chat]:
    """A bot started on ``model``, "build the project" asked and its plan approved, gone as
    far as it goes and closed: the conversation then, and the thread."""
    app, chat = await started(settings, model, **kwargs)
    try:
        await approved(app, chat)
        return await chat.snapshot(), chat
    finally:
        await app.close()


def planned(*tools: str) -> ScriptedTurn:
    """A plan of one step that says it needs ``tools``."""
    return ScriptedTurn(
        calls=[ScriptedCall("propose_plan", {"steps": ["Build it"], "tools": list(tools)})]
    )


def prose(text: str) -> ScriptedTurn:
    return ScriptedTurn(text=text)


# --- an early finish -------------------------------------------------------------------


async def test_an_early_finish_is_refused_once_and_the_run_goes_on(settings: Settings) -> None:
    spans = Spans()
    model = ScriptedModel(
        [planned("run_command"), done("Nothing to do."), run("echo built"), done("Built.")]
    )
    snap, chat = await ran(settings, model, tracer_provider=spans.provider)

    assert snap.status.lifecycle is Lifecycle.DONE
    shown = chat.out.getvalue()
    assert "↩️ finish refused: the approved plan needs run_command, and no change has" in shown
    assert "Nothing to do." not in shown and "✅ Built." in shown
    # The refused call failed with the reason as its result: the model read it next.
    refused = texts_of(model.requests[2])
    assert refused.startswith("finish refused: the approved plan needs run_command, and no")
    assert "ask_user" in refused
    [first, second] = [r for r in snap.tool_calls.values() if r.name == "finish"]
    assert first.state is ToolState.FAILED and second.state is ToolState.DONE
    [nudge] = [r.entry for r in snap.journal if isinstance(r.entry, Nudged)]
    assert nudge.why == "early_finish" and nudge.tool_use_id == first.tool_use_id
    # Not read twice: the note is the result, not another text block.
    assert "[threadbot:" not in refused
    [span] = [s for s in spans.finished() if s.name == "threadbot.nudge"]
    assert span.attributes is not None
    assert span.attributes[tracing.NUDGE_WHY] == "early_finish"
    spans.provider.shutdown()


async def test_a_second_early_finish_asks_the_people_and_the_answer_goes_on(
    settings: Settings,
) -> None:
    spans = Spans()
    model = ScriptedModel(
        [
            planned("run_command"),
            done("Looks fine already."),
            done("Really, nothing to change."),
            run("echo built"),
            done("Built."),
        ]
    )
    app, chat = await started(settings, model, tracer_provider=spans.provider)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(escalation)"
        assert len(model.requests) == 3  # no model call after the second finish
        shown = chat.out.getvalue()
        message = shown[shown.index(EARLY) :]
        assert "1. finish: Looks fine already." in message
        assert "2. finish: Really, nothing to change." in message
        assert "the approved plan needs run_command, and no change has been made yet" in message
        [escalated] = [r.entry for r in snap.journal if isinstance(r.entry, Escalated)]
        assert escalated.reason.startswith("I tried to finish twice")
        [request] = [r for r in snap.open_requests if isinstance(r, Escalation)]
        assert request.prompt == EARLY.removeprefix("🆘 ")

        await chat.reply("run the build, it has not been run", by="bob")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()

    assert snap.status.lifecycle is Lifecycle.DONE
    assert "✅ Built." in chat.out.getvalue()
    after = texts_of(model.requests[3])
    assert "[threadbot: I'm stuck (I tried to finish twice without making the change" in after
    assert after.endswith("bob (answer): run the build, it has not been run")
    assert any(isinstance(r.entry, FailuresReset) for r in snap.journal)
    [span] = [s for s in spans.finished() if s.name == "threadbot.escalate"]
    assert span.attributes is not None
    assert span.attributes[tracing.ESCALATION_WHY] == "early_finish"
    spans.provider.shutdown()


async def test_a_plan_of_reading_and_answering_is_never_refused(settings: Settings) -> None:
    model = ScriptedModel([planned("read_file", "list_files"), done("It is a Python project.")])
    snap, chat = await ran(settings, model)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert "✅ It is a Python project." in chat.out.getvalue()
    assert not any(isinstance(r.entry, Nudged) for r in snap.journal)


async def test_a_finish_after_a_denied_change_is_not_refused(settings: Settings) -> None:
    model = ScriptedModel(
        [planned("run_command"), run("rm -rf build"), done("You did not want it.")]
    )
    app, chat = await started(settings, model)
    try:
        await chat.mention("build the project")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        await chat.react(chat.bot_message("🔐 May I run this?"), "x")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE, chat.out.getvalue()
    assert not any(isinstance(r.entry, Nudged) for r in snap.journal)


# --- a reply in prose ------------------------------------------------------------------


async def test_a_reply_in_prose_is_nudged_once_by_a_journaled_note(settings: Settings) -> None:
    spans = Spans()
    model = ScriptedModel(
        [planned(), prose("I think the build works now."), run("echo built"), done("Built.")]
    )
    snap, chat = await ran(settings, model, tracer_provider=spans.provider)

    assert snap.status.lifecycle is Lifecycle.DONE
    shown = chat.out.getvalue()
    assert "I think the build works now." in shown  # a progress note, not the answer
    assert "↩️ reminded the model to end its reply with an answer or a next step" in shown
    assert "✅ Built." in shown
    # The nudge is a message in the history; the system prompt and tools are unchanged.
    nudged = texts_of(model.requests[2])
    assert nudged.startswith("[threadbot: your last reply had no tool call")
    assert model.requests[2].system == model.requests[1].system
    assert model.requests[2].tools == model.requests[1].tools
    [nudge] = [r.entry for r in snap.journal if isinstance(r.entry, Nudged)]
    assert nudge.why == "prose"
    [span] = [s for s in spans.finished() if s.name == "threadbot.nudge"]
    assert span.attributes is not None and span.attributes[tracing.NUDGE_WHY] == "prose"
    spans.provider.shutdown()


async def test_a_second_reply_in_prose_asks_the_people(settings: Settings) -> None:
    model = ScriptedModel(
        [planned(), prose("Done, I believe."), prose("As I said, it is done."), done("Built.")]
    )
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(escalation)"
        shown = chat.out.getvalue()
        message = shown[shown.index(PROSE) :]
        assert "Done, I believe." in message and "As I said, it is done." in message
        assert shown.count("↩️ reminded the model") == 1  # the second escalates instead

        await chat.reply("call finish with your answer")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert "✅ Built." in chat.out.getvalue()
    assert texts_of(model.requests[3]).endswith("(answer): call finish with your answer")


async def test_a_new_request_starts_the_count_again(settings: Settings) -> None:
    """One nudge per person's word: a reply in prose after an earlier request's nudge is
    nudged, not escalated."""
    model = ScriptedModel(
        [prose("Hello!"), done("Hello, alice."), prose("Sure."), done("It is 4.")]
    )
    app, chat = await started(settings, model)
    try:
        await chat.mention("hi")
        await app.hub.settled()
        await chat.reply("what is 2 + 2?")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert sum(isinstance(r.entry, Nudged) for r in snap.journal) == 2
    assert not any(isinstance(r.entry, Escalated) for r in snap.journal)


async def test_on_slack_the_prose_escalation_is_in_the_thread(settings: Settings) -> None:
    model = ScriptedModel(
        [planned(), prose("Done."), prose("Done, really."), done("Built on Slack.")]
    )
    async with slack_workspace(settings, model) as slack:
        thread = await slack.mention("build the project")
        await slack.react(slack.post(thread, "Plan (v1)")["ts"])
        await slack.app.hub.settled()
        asked = slack.post(thread, "I'm stuck")["text"]
        assert asked.startswith(PROSE)
        assert "Done, really." in asked
        await slack.reply(thread, "finish it", by=BOB)
        await slack.app.hub.settled()
        snap = await slack.snapshot(thread)
        slack.post(thread, "Built on Slack.")
    assert snap.status.lifecycle is Lifecycle.DONE


# --- with an expert: the second early finish is handed to it first ----------------------


async def test_with_an_expert_a_second_early_finish_is_handed_to_it_and_merged(
    settings: Settings,
) -> None:
    """The expert gets the reason and both refused finishes in its brief; its work (a
    command that changes something, then ``finish``) is merged, and the executor goes
    on and finishes: no one in the thread was asked."""
    settings.expert_model = "claude-expert"
    model = ScriptedRoles(
        planner=[planned("run_command")],
        executor=[done("Nothing to do."), done("Still nothing."), done("Built by the expert.")],
        expert=[run("echo fixed > fixed.txt"), done("Fixed it.")],
    )
    spans = Spans()
    snap, chat = await ran(settings, model, tracer_provider=spans.provider)

    assert snap.status.lifecycle is Lifecycle.DONE, chat.out.getvalue()
    shown = chat.out.getvalue()
    assert "🎓 handing this to the expert (claude-expert): I tried to finish twice" in shown
    assert "✅ Built by the expert." in shown and EARLY not in shown
    brief = str(model.of("expert").requests[0].messages[0])
    assert "I tried to finish twice without making the change the plan asks for" in brief
    assert "finish: Nothing to do." in brief and "finish: Still nothing." in brief
    [ended] = [r.entry for r in snap.journal if isinstance(r.entry, DelegationEnded)]
    assert ended.outcome == "merged"
    assert not any(isinstance(r.entry, Escalated) for r in snap.journal)
    # The third finish came after the expert's change was merged: not refused.
    finishes = [r for r in snap.tool_calls.values() if r.name == "finish"]
    assert [r.state for r in finishes][-1] is ToolState.DONE
    [span] = [s for s in spans.finished() if s.name == "threadbot.escalate"]
    assert span.attributes is not None
    assert span.attributes[tracing.ESCALATED_TO] == "expert"
    assert span.attributes[tracing.ESCALATION_WHY] == "early_finish"
    spans.provider.shutdown()


async def test_with_an_expert_a_greeting_in_prose_twice_asks_the_people_not_the_expert(
    settings: Settings,
) -> None:
    """No plan is approved while planning: there is no part of one to hand over, so the
    second reply in prose asks the people even with an expert set."""
    settings.expert_model = "claude-expert"
    model = ScriptedRoles(planner=[prose("Hello!"), prose("Hi again!"), done("Hello, alice.")])
    app, chat = await started(settings, model)
    try:
        await chat.mention("hi")
        await app.hub.settled()
        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(escalation)"
        await chat.reply("just say hello with finish")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert PROSE in chat.out.getvalue() and "✅ Hello, alice." in chat.out.getvalue()
    assert not model.of("expert").requests
    assert not any(isinstance(r.entry, DelegationEnded) for r in snap.journal)


# --- what a review found -------------------------------------------------------------------


async def test_a_bot_killed_between_an_unusable_delegation_and_its_question_asks_on_restart(
    sqlite_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stuck on nudges, handed to the expert, whose work is not usable: the bot dies after
    that is journaled and before the people are asked. Started again, the run asks the
    people, as one that went straight through does, and the executor is not called again."""
    sqlite_settings.expert_model = "claude-expert"
    model = ScriptedRoles(
        planner=[planned()],
        executor=[prose("Done, I believe."), prose("As I said, it is done.")],
        expert=[prose("No idea.")],  # no finish: not usable
    )
    reached = asyncio.Event()

    async def dies_here(*args: object, **kwargs: object) -> Outcome:
        reached.set()
        await asyncio.Event().wait()  # the process dies here: nothing more is committed
        raise AssertionError("never")

    with monkeypatch.context() as patched:
        patched.setattr(escalation, "ask_people", dies_here)
        app, chat = await started(sqlite_settings, model)
        try:
            await chat.mention("build the project")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await asyncio.wait_for(reached.wait(), 60)
        finally:
            await app.close()

    again = ScriptedRoles(executor=[done("Finished, though nobody was asked.")])
    app = await build(sqlite_settings, model=again)
    await app.start()
    try:
        await app.hub.settled()
        chat.app = app  # the same thread, read from the bot started again
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert str(snap.status) == "waiting(escalation)"
    [escalated] = [r.entry for r in snap.journal if isinstance(r.entry, Escalated)]
    assert escalated.reason == PROSE.removeprefix("🆘 I'm stuck: ")
    assert not again.of("executor").requests


async def test_the_expert_s_changes_in_a_fork_that_was_not_merged_are_no_change(
    settings: Settings,
) -> None:
    """A delegation whose work was not usable changed only its fork: a finish after it is
    still early, and refused."""
    settings.expert_model = "claude-expert"
    model = ScriptedRoles(
        planner=[planned("run_command")],
        executor=[run(FAILS), run(FAILS), done("Nothing left to do."), run("true"), done()],
        expert=[run("echo tried > tried.txt"), prose("I could not.")],
    )
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(escalation)"  # the expert could not fix it
        await chat.reply("the build is fine, finish")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    [nudge] = [r.entry for r in snap.journal if isinstance(r.entry, Nudged)]
    assert nudge.why == "early_finish"  # "Nothing left to do." was refused
    # Inside its delegation the expert is not offered ask_expert (it would be asked about
    # the executor's history, and spend the conversation's consultations).
    assert model.of("expert").requests
    for request in model.of("expert").requests:
        assert "ask_expert" not in {tool.name for tool in request.tools}
    assert "ask_expert" in {tool.name for tool in model.of("executor").requests[0].tools}


async def test_no_delegation_once_the_consultations_used_up_the_expert_s_budget(
    settings: Settings,
) -> None:
    settings.expert_model = "claude-expert"
    settings.expert_consultations = 1
    model = ScriptedRoles(
        planner=[planned()],
        executor=[
            ScriptedTurn(calls=[ScriptedCall("ask_expert", {"question": "Where is foo.h?"})]),
            run(FAILS),
            run(FAILS),
        ],
        expert=[prose("In vendor/.")],
    )
    snap, chat = await ran(settings, model)
    assert str(snap.status) == "waiting(escalation)"
    assert len(model.of("expert").requests) == 1  # the consultation; no delegation
    assert not [r for r in snap.journal if isinstance(r.entry, DelegationEnded)]
    assert "🆘 I'm stuck: the last 2 commands failed" in chat.out.getvalue()
