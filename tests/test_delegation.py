"""Delegation to the expert (issue 28): a stuck run hands its work to the expert model.

A scripted model per role (:class:`core.models.scripted.ScriptedRoles`): the
planner plans, the executor runs two commands that fail, and with ``expert_model``
set threadbot, not the model, hands the work to the expert. The expert gets a brief
of its own (the plan, each failed command and the end of its output), works with
the executor's tools in a fork of the workspace (on the branch
``threadbot/<conversation>-delegation-1`` of a clone, or in a copy of a plain
folder), and its work is usable when it called ``finish`` and the command that
failed last exits 0 again: then it is merged into the conversation's branch (or
copied back), the thread says so, and the executor goes on with its streak reset,
its next request saying what happened. An expert that fails too (it answers
without ``finish``, its work does not make the command pass, its model call fails)
ends in the question to the people, as without an expert; the expert is tried once
per streak, and again for the next. Its calls meet the same policy and approvals
(one that asks waits for a person, inside the delegation). A stop during a
delegation stops it; a bot closed during one, or killed at a ``THREADBOT_FAULT``
point in it, goes on where it was when it starts again. An escalation with a reason
of its own (no failures) briefs the expert and asks the people with that reason.
Asserted where a person and the store see it: the thread (the console harness, the
Slack fake), the journal, the requests, the workspace's git branch, each role's
requests, the spans.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from bot.app import build
from bot.settings import Settings
from conversations.events import PlatformRef, PostReply
from conversations.render import render_event
from core import tracing
from core.models.scripted import ScriptedCall, ScriptedRoles, ScriptedTurn
from core.retry import NoRetry
from core.run.agent import agent
from core.run.compose import CONTINUE, Do, Outcome, Sequence, Step
from core.run.deps import RunDeps
from core.run.escalation import escalate
from core.run.settings import EngineSettings
from core.run.state import Run
from core.vocabulary.entries import (
    AssistantTurn,
    Delegated,
    DelegationBrief,
    DelegationChecked,
    DelegationEnded,
    Escalated,
    ScopeEntered,
    ToolResultEntry,
)
from core.vocabulary.errors import ModelError
from core.vocabulary.inputs import Inbox
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import Escalation, RequestState
from core.vocabulary.run_events import EscalationAsked
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from tests.console_process import Bot, command, finish, plan
from tests.engine_setup import Setup
from tests.fakes.anthropic_server import check_tool_results
from tests.harness import Chat
from tests.slack_harness import BOB, slack_workspace
from tests.test_escalation import STUCK, approved, done, planned, run, texts_of
from tests.test_traces import Spans
from tests.test_workspaces_git import git, repo

__all__ = ["repo"]  # a fixture the tests below use, from tests.test_workspaces_git

EXPERT = "claude-expert"
HEADER = "foo.h"
FIRST = f"cat {HEADER}"
SECOND = (
    f"test -f {HEADER} && echo built || {{ echo 'error: missing header {HEADER}' >&2; exit 2; }}"
)
HANDED = f"🎓 handing this to the expert ({EXPERT}): the last 2 commands failed"


def call(name: str, **arguments: Any) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall(name, arguments)])


def write_header() -> ScriptedTurn:
    return call("write_file", path=HEADER, content="#define FOO 1\n")


def roles(expert: list[ScriptedTurn], after: list[ScriptedTurn] | None = None) -> ScriptedRoles:
    """The planner's plan, the executor's two failing commands then ``after``, and the
    expert's ``expert``."""
    return ScriptedRoles(
        planner=[planned()],
        executor=[run(FIRST), run(SECOND), *(after or [])],
        expert=expert,
    )


def entries(snap: ConversationSnapshot, kind: type) -> list[Any]:
    return [r.entry for r in snap.journal if isinstance(r.entry, kind)]


async def started(settings: Settings, model: ScriptedRoles, **kwargs: Any) -> tuple[Any, Chat]:
    settings.expert_model = EXPERT
    app = await build(settings, model=model, **kwargs)
    await app.start()
    return app, Chat(app)


# --- the expert fixes it on its branch: merged, and the executor goes on ----------------


async def test_an_expert_that_fixes_it_on_its_branch_is_merged_and_the_executor_goes_on(
    settings: Settings, repo: Path
) -> None:
    settings.git_repo = str(repo)
    spans = Spans()
    commit = "git -c user.email=x@example.com -c user.name=expert commit -qm 'add the header'"
    model = roles(
        expert=[
            write_header(),
            call("run_command", command=f"git add {HEADER} && {commit}"),
            call("finish", answer="The header was missing: added foo.h."),
        ],
        # After the merge: one more failure does not escalate (the streak was reset).
        after=[run("exit 3"), done()],
    )
    app, chat = await started(settings, model, tracer_provider=spans.provider)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
    finally:
        await app.close()

    assert snap.status.lifecycle is Lifecycle.DONE, shown
    assert "✅ Built." in shown
    branch = f"threadbot/{snap.id}-delegation-1"
    # The thread: two progress notes, and no question to the people.
    assert HANDED in shown
    assert f"🎓 the expert fixed it on `{branch}`: merged (`{SECOND[:79]}" in shown
    assert STUCK not in shown
    assert not [r for r in snap.requests if isinstance(r, Escalation)]

    # The expert: its own model, a brief of its own, the executor's tools.
    expert = model.of("expert").requests
    assert len(expert) == 3
    assert {r.model for r in expert} == {EXPERT} and {r.role for r in expert} == {"expert"}
    first = expert[0].messages
    assert len(first) == 1 and first[0]["role"] == "user"
    [brief] = [block["text"] for block in first[0]["content"]]
    assert brief.startswith("[threadbot: you are the expert.")
    assert "The approved plan:\n1. Build it" in brief
    assert f"1. `{FIRST}`" in brief and "No such file" in brief
    assert "error: missing header foo.h" in brief and "exit code 2" in brief
    assert f"the branch {branch}" in brief and "exits 0" in brief
    # The executor's tools, less ask_expert (the expert is not offered a consultation of
    # itself).
    executors = {t.name for t in model.requests[1].tools}
    assert {t.name for t in expert[0].tools} == executors - {"ask_expert"}

    # The executor goes on: its next request says what happened, and holds none of the
    # expert's turns.
    executor = model.of("executor").requests
    assert len(executor) == 4
    after = texts_of(executor[2])
    assert f"it fixed it on the branch {branch}, now merged into your workspace" in after
    assert "The expert's summary: The header was missing: added foo.h." in after
    said = str(executor[2].messages)
    assert "write_file" not in said and "you are the expert" not in said

    # The journal: the delegation, its scope (the expert's role), the check, the end.
    [delegated] = entries(snap, Delegated)
    assert (delegated.n, delegated.model, delegated.branch) == (1, EXPERT, branch)
    assert [f.call for f in delegated.failures] == [f"`{FIRST}`", f"`{SECOND}`"]
    [scope] = entries(snap, ScopeEntered)
    assert (scope.scope, scope.role) == ("delegation-1", "expert")
    assert len(entries(snap, DelegationBrief)) == 1
    [checked] = entries(snap, DelegationChecked)
    assert checked.passed and checked.command == SECOND and "built" in checked.output
    [ended] = entries(snap, DelegationEnded)
    assert ended.outcome == "merged" and ended.branch == branch
    turns = entries(snap, AssistantTurn)
    assert [t.usage.role for t in turns] == [
        "planner",
        *["executor"] * 2,
        *["expert"] * 3,
        *["executor"] * 2,
    ]

    # The workspace: the conversation's branch holds the expert's commit and its file;
    # the expert's branch is there beside it; the fork is kept.
    workspace = Path(snap.workspace)
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=workspace) == f"threadbot/{snap.id}"
    assert "add the header" in git("log", "--format=%s", cwd=workspace)
    assert (workspace / HEADER).read_text() == "#define FOO 1\n"
    assert branch in git("branch", "--format=%(refname:short)", cwd=workspace)
    fork = workspace.with_name(f"{workspace.name}-delegation-1")
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=fork) == branch

    # A span of its own, to the expert; the expert's model calls inside it.
    [span] = [s for s in spans.finished() if s.name == "threadbot.escalate"]
    assert span.attributes is not None
    assert span.attributes[tracing.ESCALATED_TO] == "expert"
    assert span.attributes[tracing.ESCALATION_FAILURES] == 2
    assert span.attributes[tracing.ESCALATION_OUTCOME] == "merged"
    inside = [s for s in spans.finished() if s.parent and s.parent.span_id == span.context.span_id]
    assert [s.name for s in inside if s.name.startswith("chat")] == [f"chat {EXPERT}"] * 3
    spans.provider.shutdown()


# --- an expert that fails too: the question to the people ---------------------------------

FAILING_EXPERTS = {
    # It answers in prose, without calling finish.
    "answers": (
        [write_header(), ScriptedTurn(text="I looked, it is fine.")],
        "it answered without calling finish",
    ),
    # It finishes, but the command that failed last still fails.
    "still_fails": (
        [call("write_file", path="bar.h", content=""), call("finish", answer="Fixed.")],
        f"`{SECOND[:79]}…` still fails (error: missing header foo.h)",
    ),
    # Its model call fails: a failed step of the delegation, never a failed run.
    "api_fails": (
        [ScriptedTurn(error=ModelError("the model is overloaded (529)", retryable=True))],
        "its model call failed (the model is overloaded (529))",
    ),
}


@pytest.mark.parametrize("how", sorted(FAILING_EXPERTS))
async def test_an_expert_that_fails_too_ends_in_the_question_to_the_people(
    settings: Settings, how: str
) -> None:
    expert, why = FAILING_EXPERTS[how]
    model = roles(expert=expert, after=[run(SECOND), done("Built with help.")])
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
        assert str(snap.status) == "waiting(escalation)", shown

        # The thread: the hand-over, the expert's failure, then the question as without one.
        assert HANDED in shown
        assert f"🎓 the expert could not fix it: {why}" in shown
        message = shown[shown.index(STUCK) :]
        assert f"1. `{FIRST}`" in message and f"2. `{SECOND}`" in message
        assert "error: missing header foo.h" in message
        [ended] = entries(snap, DelegationEnded)
        assert ended.outcome == "not_usable" and why in ended.why
        [escalated] = entries(snap, Escalated)
        assert [f.call for f in escalated.failures] == [f"`{FIRST}`", f"`{SECOND}`"]
        # The expert worked in a copy: the conversation's workspace is untouched.
        workspace = Path(snap.workspace)
        fork = workspace.with_name(f"{workspace.name}-delegation-1")
        assert fork.is_dir() and not (workspace / "bar.h").exists()
        assert not (workspace / HEADER).exists()

        # The people answer; the executor goes on with the answer, the expert not again.
        (workspace / HEADER).write_text("")
        await chat.reply("I added the header myself, build again", by="bob")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert "✅ Built with help." in chat.out.getvalue()
    assert len(model.of("expert").requests) == len(expert)
    after = texts_of(model.of("executor").requests[2])
    assert f"the expert, who could not fix it: {why}" in after
    assert after.endswith("bob (answer): I added the header myself, build again")


async def test_the_expert_is_tried_once_per_streak_and_again_for_the_next(
    settings: Settings,
) -> None:
    model = roles(
        expert=[
            ScriptedTurn(text="No idea."),  # delegation 1: not usable
            write_header(),  # delegation 2, after the people's answer and two more failures
            call("finish", answer="Added foo.h."),
        ],
        after=[run(FIRST), run(SECOND), run(SECOND), done()],
    )
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        assert str((await chat.snapshot()).status) == "waiting(escalation)"
        assert len(model.of("expert").requests) == 1  # the people, not the expert again

        await chat.reply("try once more", by="bob")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE, chat.out.getvalue()
    assert [(d.n, len(d.failures)) for d in entries(snap, Delegated)] == [(1, 2), (2, 2)]
    assert [e.outcome for e in entries(snap, DelegationEnded)] == ["not_usable", "merged"]
    assert len(entries(snap, Escalated)) == 1
    # The second delegation: a brief of its own, in a fork of its own.
    second = model.of("expert").requests[1]
    assert len(second.messages) == 1 and "you are the expert" in str(second.messages)
    workspace = Path(snap.workspace)
    assert (workspace.with_name(f"{workspace.name}-delegation-2") / HEADER).exists()
    assert (workspace / HEADER).exists()


# --- Slack: the copy of a plain workspace, copied back; and the question after a failure ---


async def test_on_slack_an_expert_fixes_it_in_a_copy_which_is_copied_back(
    settings: Settings,
) -> None:
    settings.expert_model = EXPERT
    model = roles(
        expert=[write_header(), call("finish", answer="Added the header.")],
        after=[run(SECOND), done("Built on Slack.")],
    )
    async with slack_workspace(settings, model) as slack:  # type: ignore[arg-type]
        thread = await slack.mention("build the project")
        await slack.react(slack.post(thread, "Plan (v1)")["ts"])
        await slack.app.hub.settled()
        snap = await slack.snapshot(thread)
        texts = [post["text"] for post in slack.posts(thread)]
    shown = "\n".join(texts)
    assert snap.status.lifecycle is Lifecycle.DONE, shown
    assert HANDED in shown
    assert "🎓 the expert fixed it in a copy: copied back" in shown
    assert "Built on Slack." in texts[-1] and STUCK not in shown
    # The conversation's workspace holds the expert's file; the copy is kept.
    workspace = Path(snap.workspace)
    assert (workspace / HEADER).read_text() == "#define FOO 1\n"
    assert (workspace.with_name(f"{workspace.name}-delegation-1") / HEADER).exists()
    [delegated] = entries(snap, Delegated)
    assert delegated.branch is None
    # The executor's command passes now, in its own workspace.
    [*_, last_command] = [r for r in snap.tool_calls.values() if r.name == "run_command"]
    results = {e.tool_use_id: e for e in entries(snap, ToolResultEntry)}
    assert last_command.input["command"] == SECOND
    assert last_command.state is ToolState.DONE
    assert "built" in results[last_command.tool_use_id].content


async def test_on_slack_an_expert_that_fails_ends_in_the_question_and_a_reply_goes_on(
    settings: Settings,
) -> None:
    settings.expert_model = EXPERT
    model = roles(
        expert=[call("finish", answer="Nothing to do.")],
        after=[done("Built after all.")],
    )
    async with slack_workspace(settings, model) as slack:  # type: ignore[arg-type]
        thread = await slack.mention("build the project")
        await slack.react(slack.post(thread, "Plan (v1)")["ts"])
        await slack.app.hub.settled()
        failed = slack.post(thread, "the expert could not fix it")
        asked = slack.post(thread, "I'm stuck")
        assert asked["text"].startswith(STUCK)
        assert "error: missing header foo.h" in asked["text"]
        assert failed["ts"] < asked["ts"]

        await slack.reply(thread, "use the vendored headers", by=BOB)
        await slack.app.hub.settled()
        snap = await slack.snapshot(thread)
    assert snap.status.lifecycle is Lifecycle.DONE
    [request] = [r for r in snap.requests if isinstance(r, Escalation)]
    assert request.state is RequestState.DECIDED
    assert texts_of(model.of("executor").requests[2]).endswith("(answer): use the vendored headers")


async def test_the_expert_s_call_that_asks_waits_for_a_person_and_goes_on_in_its_copy(
    settings: Settings,
) -> None:
    risky = f"rm -rf build && echo '#define FOO 1' > {HEADER}"
    model = roles(
        expert=[call("run_command", command=risky), call("finish", answer="Made foo.h.")],
        after=[run(SECOND), done()],
    )
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        # The same policy: the expert's command asks, and the run waits inside the delegation.
        assert str(snap.status) == "waiting(tool_approval)"
        assert len(model.of("expert").requests) == 1
        workspace = Path(snap.workspace)
        fork = workspace.with_name(f"{workspace.name}-delegation-1")
        assert not (fork / HEADER).exists()

        # A note while it waits there is for the run: the expert reads it, and so does
        # the executor after the delegation (the rest of the expert's scope it does not).
        await chat.reply("careful: the build folder holds the release notes", by="bob")
        await chat.react(chat.bot_message("🔐 May I run this?"))
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE, chat.out.getvalue()
    note = "bob (note while you work): careful: the build folder holds the release notes"
    assert note in str(model.of("expert").requests[1].messages)
    after = model.of("executor").requests[2]  # the executor's first request after it
    assert note in str(after.messages) and "Made foo.h." not in str(after.messages[:-1])
    # It ran in the expert's copy, and came back with the merge.
    assert (fork / HEADER).read_text() == "#define FOO 1\n"
    assert (workspace / HEADER).read_text() == "#define FOO 1\n"
    [ended] = entries(snap, DelegationEnded)
    assert ended.outcome == "merged"
    assert len(model.of("expert").requests) == 2
    assert "✅ Built." in chat.out.getvalue()


# --- a stop during a delegation -------------------------------------------------------------


async def test_a_stop_during_a_delegation_stops_it(settings: Settings) -> None:
    held = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("finish", {"answer": "x"})])
    model = roles(expert=[write_header(), held])
    model.of("planner").add(
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Starting over."})])
    )
    app, chat = await started(settings, model)
    try:
        await chat.mention("build the project")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await asyncio.wait_for(held.started.wait(), 30)  # the expert is at work, held

        await chat.stop()
        await app.hub.settled()
        held.gate.set()  # too late: its run is gone
        snap = await chat.snapshot()
        assert snap.status.lifecycle is Lifecycle.CANCELLED
        assert chat.said()[-1] == "⏹ Stopped by alice."
        assert len(entries(snap, Delegated)) == 1 and not entries(snap, DelegationEnded)
        assert not [r for r in snap.requests if isinstance(r, Escalation)]
        assert "finish" not in {r.name for r in snap.tool_calls.values()}

        # A new request after the stop: the delegation is over, the expert not asked again.
        await chat.reply("start over, please")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert chat.said()[-1] == "✅ Starting over."
    assert len(model.of("expert").requests) == 2
    # The planner's request holds the new request, no expert turn, and every call of it
    # has its result.
    planner = model.of("planner").requests[-1]
    assert texts_of(planner).endswith("alice: start over, please")
    assert "you are the expert" not in str(planner.messages)
    assert check_tool_results(planner.messages) is None


# --- a restart during a delegation ----------------------------------------------------------


async def test_a_bot_closed_during_a_delegation_goes_on_where_it_was_when_it_starts_again(
    sqlite_settings: Settings, repo: Path
) -> None:
    sqlite_settings.git_repo = str(repo)
    held = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("finish", {"answer": "x"})])
    model = roles(expert=[write_header(), held])
    app, chat = await started(sqlite_settings, model)
    try:
        await chat.mention("build the project")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await asyncio.wait_for(held.started.wait(), 30)  # the expert at work, held
    finally:
        await app.close()  # the bot goes away: the model call is cut, nothing committed

    # A new bot on the same database: the run goes on inside the delegation.
    again = ScriptedRoles(
        expert=[call("finish", answer="Added foo.h.")], executor=[run(SECOND), done()]
    )
    app, chat_again = await started(sqlite_settings, again)
    chat_again.thread = chat.thread
    try:
        await app.hub.settled()
        snap = await chat_again.snapshot()
    finally:
        await app.close()
    shown = chat_again.out.getvalue()
    assert snap.status.lifecycle is Lifecycle.DONE, shown
    assert "🎓 the expert fixed it on" in shown and "✅ Built." in shown
    # The expert's request after the restart: its brief and its own turn before it, from
    # the journal; nothing was briefed, forked or run twice.
    [request] = again.of("expert").requests
    roles_seen = [m["role"] for m in request.messages]
    assert roles_seen == ["user", "assistant", "user"]
    assert "you are the expert" in str(request.messages[0]) and "wrote 14 bytes" in str(request)
    for kind in (Delegated, DelegationBrief, ScopeEntered, DelegationEnded):
        assert len(entries(snap, kind)) == 1, kind
    assert [r.name for r in snap.tool_calls.values()].count("write_file") == 1
    workspace = Path(snap.workspace)
    assert (workspace / HEADER).read_text() == "#define FOO 1\n"
    assert f"threadbot: the expert's work on threadbot/{snap.id}-delegation-1" in git(
        "log", "--format=%s", cwd=workspace
    )


@pytest.mark.parametrize(
    "fault",
    [
        "after_scope_entered:1",  # the delegation's scope entered, nothing in it yet
        "after_model_response:4",  # the expert's first turn committed, its call not run
        "after_tool_result:3",  # the expert's first call's result committed
    ],
)
def test_a_restart_during_a_delegation_goes_on_where_it_was(tmp_path: Path, fault: str) -> None:
    header = {"name": "write_file", "input": {"path": HEADER, "content": "#define FOO 1\n"}}
    bot = Bot(
        tmp_path,
        [
            plan("Build it"),
            {"calls": [command(FIRST)]},
            {"calls": [command(SECOND)]},
            {"role": "expert", "calls": [header]},
            {"role": "expert", **finish("Added foo.h.")},
            {"calls": [command(SECOND)]},
            finish("Built after all."),
        ],
        env={"THREADBOT_EXPERT_MODEL": EXPERT},
    )
    first = bot.run("build the project\n+✅ 2\n", fault=fault)
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert HANDED in first.stdout

    second = bot.run()
    assert second.returncode == 0, second.stderr
    assert "🎓 the expert fixed it in a copy: copied back" in second.stdout
    assert "✅ Built after all." in second.stdout
    kinds = [k for (k,) in bot.query("select kind from journal order by seq")]
    for kind in (
        "delegated",
        "scope_entered",
        "delegation_brief",
        "delegation_checked",
        "scope_left",
        "delegation_ended",
    ):
        assert kinds.count(kind) == 1, (kind, kinds)
    assert "escalated" not in kinds
    assert bot.query("select state from tool_calls where name = 'write_file'") == [("done",)]
    assert (bot.workspace() / HEADER).read_text() == "#define FOO 1\n"
    (body,) = bot.query("select body from journal where kind = 'delegation_ended'")[0]
    assert json.loads(body)["outcome"] == "merged"


# --- an escalation with a reason of its own (a refused finish, a prose reply...) ------------

REASON = "finish was called twice with no change made"


def escalating_first(deps: RunDeps, inbox: Inbox | None) -> Step:
    """The agent, after one escalation with :data:`REASON` and no failures at its start
    (as the run's other checks call :func:`core.run.escalation.escalate`)."""

    async def stuck(run: Run) -> Outcome:
        journal = run.snap.journal
        if any(isinstance(r.entry, Delegated | Escalated) for r in journal):
            return CONTINUE
        return await escalate(run, deps, (), reason=REASON)

    return Sequence(Do("stuck", stuck), agent(deps, inbox))


async def test_an_escalation_with_a_reason_and_no_approved_plan_asks_the_people(
    tmp_path: Path,
) -> None:
    """An escalation with a reason of its own (as a second early finish or reply in prose
    makes) before any plan is approved: there is no part of a plan to hand over, so the
    people are asked even with an expert set, with the reason as the message's title.
    (With a plan, the expert gets the reason in its brief: tests/test_nudges.py.)"""
    script = [{"role": "expert", **finish("never asked")}, finish("Answered.")]
    setup = Setup(
        tmp_path,
        NoRetry(),
        script,
        settings=EngineSettings(expert_model=EXPERT),
        compose=escalating_first,
    )
    await setup.mention(setup.engine())
    snap = await setup.snapshot()

    assert not [r for r in setup.requests if r.role == "expert"]
    assert not entries(snap, Delegated)
    assert str(snap.status) == "waiting(escalation)"
    [request] = snap.open_requests
    assert isinstance(request, Escalation) and request.prompt == f"I'm stuck: {REASON}"
    [escalated] = entries(snap, Escalated)
    assert escalated.reason == REASON
    asked = EscalationAsked(request_id=request.id, failures=(), reason=REASON)
    [shown] = render_event(PlatformRef(platform="console", channel="c"), asked)
    assert isinstance(shown.action, PostReply)
    assert shown.action.text.startswith(f"🆘 I'm stuck: {REASON}\n")


async def test_an_expert_that_leaves_its_branch_is_not_merged(
    settings: Settings, repo: Path
) -> None:
    """The expert's work on another branch would not come back with the delegation's:
    the merge refuses it (nothing is said merged that did not arrive), and the people
    are asked."""
    settings.git_repo = str(repo)
    model = roles(
        expert=[
            call("run_command", command="git checkout -q -b elsewhere"),
            write_header(),
            call("finish", answer="Added foo.h."),
        ],
    )
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
    finally:
        await app.close()
    [ended] = entries(snap, DelegationEnded)
    assert ended.outcome == "not_usable"
    assert "the expert left threadbot/" in ended.why and "HEAD is refs/heads/elsewhere" in ended.why
    assert str(snap.status) == "waiting(escalation)" and STUCK in shown
    assert not (Path(snap.workspace) / HEADER).exists()  # nothing arrived, nothing said so
