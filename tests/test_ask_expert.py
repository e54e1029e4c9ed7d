"""``ask_expert`` (issue 28): one consultation of the expert model, within and past its budget.

The executor (a script per role: :class:`ScriptedRoles`) calls ``ask_expert``; threadbot
asks the expert model with the run's system prompt and tools, ``tool_choice`` none,
the conversation up to the turn before the call and the question last, and the
answer is the call's result in the executor's next request. Asserted where it shows:
the expert's request, the executor's next request, the journal
(``ExpertConsulted``), the thread (``🎓 asked the expert: ...``, in the console and
on the Slack fake), the span
(``threadbot.ask_expert``), the footer's and ``threadbot usage --by role``'s expert
line. Past its budget (a count of consultations, or dollars, each layered) a call is
refused, its result says which budget is spent, and it counts toward the failure
streak: two such calls with ``failure_limit`` 2 ask the people (🆘). An expert whose
API call fails fails the call, never the run. Without an expert the tool is not
offered, and a call all the same is denied. The local Messages API fake refuses a
history with tool blocks and no tools, and a ``tool_choice`` without tools, with a
400 as the API does (through the real ``anthropic`` client), and accepts a whole
consultation made through the real Anthropic model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from bot.app import build
from bot.settings import ModelPrice, Settings
from core import tracing
from core.models.base import ModelRequest
from core.models.scripted import ScriptedCall, ScriptedRoles, ScriptedTurn
from core.run.consultation import ASKED
from core.tools.control import NO_EXPERT
from core.vocabulary.entries import Escalated, ExpertConsulted
from core.vocabulary.errors import ModelError
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.tool_records import ToolState
from tests.fakes.anthropic_server import (
    CHOICE_WITHOUT_TOOLS,
    TOOLS_NEEDED,
    FakeAnthropicServer,
    Reply,
    text,
    tool_use,
)
from tests.harness import Chat
from tests.slack_harness import slack_workspace
from tests.test_cache_prefix import running
from tests.test_traces import Spans
from tests.test_usage_report import PRICE, footer_of, usage

EXPERT = "claude-expert"
EXECUTOR = "claude-does"
EXPERT_PRICE = ModelPrice(input=15, output=75, cache_read=1.5, cache_write=18.75)
"""A scripted call (100 input, 20 output tokens) at this price costs 3,000 µ$."""
QUESTION = "The build cannot find foo.h; it is in vendor/include. How do I tell make?"
ADVICE = "Add -Ivendor/include to CFLAGS in the Makefile."
FAILING = "echo 'error: missing header foo.h' >&2; exit 2"


def planned() -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Build it"]})])


def ask(question: str = QUESTION) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("ask_expert", {"question": question})])


def done(answer: str = "Built.") -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def run(command: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("run_command", {"command": command})])


def with_expert(settings: Settings) -> Settings:
    """``settings`` with priced planner, executor and expert models."""
    settings.planner_model = EXECUTOR
    settings.executor_model = EXECUTOR
    settings.expert_model = EXPERT
    settings.prices = {EXECUTOR: PRICE, EXPERT: EXPERT_PRICE}
    return settings


def result_of(request: ModelRequest, tool_use_id: str) -> dict[str, Any]:
    """The ``tool_result`` block for ``tool_use_id`` in ``request``'s last message."""
    (found,) = [
        block
        for block in request.messages[-1]["content"]
        if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id
    ]
    return found


def tool_uses(request: ModelRequest) -> list[str]:
    """The names of the tools every ``tool_use`` block of ``request`` calls."""
    return [
        block["name"]
        for message in request.messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


async def approved_run(settings: Settings, model: ScriptedRoles, **kwargs: Any) -> tuple[Any, Chat]:
    """A started bot, "build the project" asked, its plan approved and the run gone as
    far as it goes."""
    app = await build(settings, model=model, **kwargs)
    await app.start()
    chat = Chat(app)
    await chat.mention("build the project")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    return app, chat


# --- within the budget ----------------------------------------------------------------


async def test_the_executor_asks_the_expert_and_reads_its_answer(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    settings = with_expert(sqlite_settings)
    spans = Spans()
    model = ScriptedRoles(
        planner=[planned()],
        executor=[ask(), done()],
        expert=[ScriptedTurn(text=ADVICE)],
    )
    app, chat = await approved_run(settings, model, tracer_provider=spans.provider)
    try:
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
    finally:
        await app.close()

    assert snap.status.lifecycle is Lifecycle.DONE
    assert [r.role for r in model.requests] == ["planner", "executor", "expert", "executor"]
    asking, after = model.of("executor").requests
    (consulted,) = model.of("expert").requests

    # The expert's request: the executor's model id swapped for the expert's, the same
    # system prompt and tools (ask_expert among them), no tool use allowed.
    assert (consulted.model, consulted.role, consulted.tool_choice) == (EXPERT, "expert", "none")
    assert asking.tool_choice == "auto" and after.tool_choice == "auto"
    assert consulted.system == asking.system
    assert consulted.tools == asking.tools
    assert "ask_expert" in [t.name for t in consulted.tools]
    # The conversation up to the turn before: the executor's request that asked, with
    # the question after its last blocks; no turn that calls ask_expert.
    assert consulted.messages[:-1] == asking.messages[:-1]
    last = consulted.messages[-1]
    assert last["role"] == "user"
    assert last["content"][:-1] == asking.messages[-1]["content"]
    assert last["content"][-1] == {"type": "text", "text": ASKED + QUESTION}
    assert "ask_expert" not in tool_uses(consulted)
    assert tool_uses(after)[-1] == "ask_expert"

    # The answer is the call's result in the executor's next request.
    (call,) = [r for r in snap.tool_calls.values() if r.name == "ask_expert"]
    assert call.state is ToolState.DONE
    assert result_of(after, call.tool_use_id) == {
        "type": "tool_result",
        "tool_use_id": call.tool_use_id,
        "content": ADVICE,
    }
    # The journal: the consultation, its question and the expert's priced call.
    (entry,) = [r.entry for r in snap.journal if isinstance(r.entry, ExpertConsulted)]
    assert (entry.tool_use_id, entry.question, entry.outcome) == (
        call.tool_use_id,
        QUESTION,
        "answered",
    )
    assert entry.usage is not None
    assert (entry.usage.model, entry.usage.role, entry.usage.position) == (
        EXPERT,
        "expert",
        "executing",
    )
    assert entry.usage.cost_micro_usd == 3_000  # 100 x 15 + 20 x 75
    # The thread: a progress note with the question, shortened.
    assert "🎓 asked the expert: The build cannot find foo.h; it is in vendor/include." in shown
    # The footer's role line, and threadbot usage --by role.
    footer = footer_of(chat, "✅ Built.")
    roles = shown[shown.index(footer) :].splitlines()[1].strip()
    assert roles.startswith("— planner claude-does: 1 model call")
    assert "executor claude-does: 2 model calls" in roles
    assert roles.endswith("expert claude-expert: 1 model call, $0.0030")
    by_role = usage(tmp_path, settings, "--by", "role")
    assert [(line["key"], line["calls"]) for line in by_role["lines"]] == [
        ("executor", 2),
        ("expert", 1),
        ("planner", 1),
    ]
    (expert_line,) = [line for line in by_role["lines"] if line["key"] == "expert"]
    assert expert_line["cost_micro_usd"] == 3_000
    by_model = usage(tmp_path, settings, "--by", "model")
    assert [(line["key"], line["calls"]) for line in by_model["lines"]] == [
        (EXECUTOR, 3),
        (EXPERT, 1),
    ]
    # A span of its own, a child of the run's, the expert's model call inside it.
    finished = spans.finished()
    (span,) = [s for s in finished if s.name == "threadbot.ask_expert"]
    assert span.attributes is not None
    assert span.attributes[tracing.CONSULTATION_OUTCOME] == "answered"
    assert span.attributes[tracing.CONSULTATION_NUMBER] == 1
    assert span.attributes["gen_ai.tool.call.id"] == call.tool_use_id
    assert span.attributes[tracing.CONVERSATION_ID] == snap.id
    assert span.parent is not None
    (parent,) = [s for s in finished if s.context.span_id == span.parent.span_id]
    assert parent.name == "invoke_agent threadbot"
    (chat_span,) = [s for s in finished if s.name == f"chat {EXPERT}"]
    assert chat_span.parent is not None and chat_span.parent.span_id == span.context.span_id
    spans.provider.shutdown()


async def test_on_slack_the_thread_sees_the_consultation_and_the_answer(
    settings: Settings,
) -> None:
    settings = with_expert(settings)
    model = ScriptedRoles(
        planner=[planned()],
        executor=[ask(), done("Built with the vendored headers.")],
        expert=[ScriptedTurn(text=ADVICE)],
    )
    async with slack_workspace(settings, model) as slack:
        thread = await slack.mention("build the project")
        await slack.react(slack.post(thread, "Plan (v1)")["ts"])
        await slack.app.hub.settled()
        note = slack.post(thread, "🎓 asked the expert")
        answered = slack.post(thread, "Built with the vendored headers.")
        snap = await slack.snapshot(thread)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert "🎓 asked the expert: The build cannot find foo.h" in note["text"]
    assert note["ts"] < answered["ts"]
    assert "expert claude-expert: 1 model call, $0.0030" in answered["text"]


# --- past the budget ----------------------------------------------------------------


async def test_past_the_count_budget_a_call_is_refused_and_two_ask_the_people(
    settings: Settings,
) -> None:
    settings = with_expert(settings)
    settings.expert_consultations = 1
    spans = Spans()
    model = ScriptedRoles(
        planner=[planned()],
        executor=[ask(), ask("And what about bar.c?"), ask("Anything else?"), done()],
        expert=[ScriptedTurn(text=ADVICE)],
    )
    app, chat = await approved_run(settings, model, tracer_provider=spans.provider)
    try:
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
    finally:
        await app.close()

    # The refused calls asked no one, and the streak they make is not handed to the
    # expert (its budget is spent): the people are asked.
    assert len(model.of("expert").requests) == 1
    assert not [r for r in snap.journal if r.entry.kind == "delegated"]
    calls = [r for r in snap.tool_calls.values() if r.name == "ask_expert"]
    assert [c.state for c in calls] == [ToolState.DONE, ToolState.FAILED, ToolState.FAILED]
    refused = model.of("executor").requests[2]
    said = result_of(refused, calls[1].tool_use_id)
    assert said["is_error"] is True
    assert said["content"] == (
        "Not asked: this conversation's budget for the expert is spent (1 of 1 consultation "
        "made). Go on without the expert, or ask the people with ask_user."
    )
    entries = [r.entry for r in snap.journal if isinstance(r.entry, ExpertConsulted)]
    assert [(e.outcome, e.reason, e.usage is None) for e in entries] == [
        ("answered", "", False),
        ("refused", "1 of 1 consultation made", True),
        ("refused", "1 of 1 consultation made", True),
    ]
    assert "🎓 the expert was not asked: its budget here is spent (1 of 1 consultation made)" in (
        shown
    )
    # Two refused calls in a row, failure_limit 2: the people are asked.
    assert str(snap.status) == "waiting(escalation)"
    assert len(model.of("executor").requests) == 3  # no model call after the second refusal
    assert "🆘 I'm stuck: the last 2 calls failed" in shown  # not commands
    (escalated,) = [r.entry for r in snap.journal if isinstance(r.entry, Escalated)]
    assert [f.tool for f in escalated.failures] == ["ask_expert", "ask_expert"]
    assert "budget for the expert is spent" in escalated.failures[0].output
    outcomes = [
        (s.attributes or {}).get(tracing.CONSULTATION_OUTCOME)
        for s in spans.finished()
        if s.name == "threadbot.ask_expert"
    ]
    assert outcomes == ["answered", "refused", "refused"]
    spans.provider.shutdown()


async def test_past_the_dollar_budget_a_call_is_refused(settings: Settings) -> None:
    settings = with_expert(settings)
    settings.expert_budget_usd = 0.002  # one consultation costs $0.0030
    model = ScriptedRoles(
        planner=[planned()],
        executor=[ask(), ask("One more?"), done("Built without more advice.")],
        expert=[ScriptedTurn(text=ADVICE), ScriptedTurn(text="never asked")],
    )
    app, chat = await approved_run(settings, model)
    try:
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
    finally:
        await app.close()

    # One refusal is below failure_limit: the executor goes on and finishes.
    assert snap.status.lifecycle is Lifecycle.DONE
    assert len(model.of("expert").requests) == 1
    calls = [r for r in snap.tool_calls.values() if r.name == "ask_expert"]
    assert [c.state for c in calls] == [ToolState.DONE, ToolState.FAILED]
    said = result_of(model.of("executor").requests[2], calls[1].tool_use_id)["content"]
    assert said.startswith(
        "Not asked: this conversation's budget for the expert is spent "
        "($0.0030 of $0.0020 spent on consultations)."
    )
    assert "its budget here is spent ($0.0030 of $0.0020 spent on consultations)" in shown


# --- an expert that fails, no expert at all -----------------------------------------------


async def test_an_expert_whose_api_call_fails_fails_the_call_not_the_run(
    settings: Settings,
) -> None:
    settings = with_expert(settings)
    broken = ModelError("The model API is overloaded", retryable=True)
    model = ScriptedRoles(
        planner=[planned()],
        executor=[ask(), run(FAILING), done()],
        expert=[ScriptedTurn(error=broken)],
    )
    app, chat = await approved_run(settings, model)
    try:
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
    finally:
        await app.close()

    # The run went on: the executor read the failure and ran a command.
    (call,) = [r for r in snap.tool_calls.values() if r.name == "ask_expert"]
    assert call.state is ToolState.FAILED
    said = result_of(model.of("executor").requests[1], call.tool_use_id)
    assert said["content"] == "The expert could not be asked: The model API is overloaded"
    assert said["is_error"] is True
    (entry,) = [r.entry for r in snap.journal if isinstance(r.entry, ExpertConsulted)]
    assert (entry.outcome, entry.reason, entry.usage) == (
        "failed",
        "The model API is overloaded",
        None,
    )
    assert "🎓 the expert could not answer: The model API is overloaded" in shown
    assert "⚠️" not in shown  # no failed run
    # It counts: with the failing command after it, the streak reaches 2.
    assert str(snap.status) == "waiting(escalation)"
    (escalated,) = [r.entry for r in snap.journal if isinstance(r.entry, Escalated)]
    assert [f.tool for f in escalated.failures] == ["ask_expert", "run_command"]


@pytest.mark.parametrize("consultations", [None, 0], ids=["no-expert", "no-consultation"])
async def test_without_an_expert_the_tool_is_not_offered_and_a_call_is_denied(
    settings: Settings, consultations: int | None
) -> None:
    if consultations is not None:  # an expert, but no consultation allowed
        settings = with_expert(settings)
        settings.expert_consultations = consultations
    model = ScriptedRoles(planner=[planned()], executor=[ask(), done()])
    app, chat = await approved_run(settings, model)
    try:
        snap = await chat.snapshot()
    finally:
        await app.close()

    assert snap.status.lifecycle is Lifecycle.DONE
    assert model.of("expert").requests == []
    for request in model.requests:
        assert "ask_expert" not in [t.name for t in request.tools]
    (call,) = [r for r in snap.tool_calls.values() if r.name == "ask_expert"]
    assert call.state is ToolState.DENIED  # denied, not failed: no failure counted
    said = result_of(model.of("executor").requests[1], call.tool_use_id)
    assert said["content"] == NO_EXPERT
    assert not any(isinstance(r.entry, ExpertConsulted) for r in snap.journal)


# --- the Messages API fake, through the real client ------------------------------------

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Why does the build fail?"},
    {"role": "assistant", "content": [tool_use("toolu_01", "run_command", {"command": "make"})]},
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "foo.h missing"},
            {"type": "text", "text": "What now?"},
        ],
    },
]
RUN_COMMAND = {
    "name": "run_command",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


async def test_the_fake_refuses_tool_blocks_and_a_tool_choice_without_tools() -> None:
    async with FakeAnthropicServer([[text("Fine.")]]) as server:
        client = anthropic.AsyncAnthropic(
            api_key="test-key", base_url=server.base_url, max_retries=0
        )
        try:
            with pytest.raises(anthropic.BadRequestError) as blocks:
                await client.messages.create(
                    model="claude-test",
                    max_tokens=100,
                    messages=HISTORY,
                )
            with pytest.raises(anthropic.BadRequestError) as choice:
                await client.messages.create(
                    model="claude-test",
                    max_tokens=100,
                    messages=[{"role": "user", "content": "Hi"}],
                    tool_choice={"type": "none"},
                )
            # Both mended: the tools defined, tool_choice none beside them.
            answered = await client.messages.create(
                model="claude-test",
                max_tokens=100,
                messages=HISTORY,
                tools=[RUN_COMMAND],
                tool_choice={"type": "none"},
            )
        finally:
            await client.close()

    for refused, said in ((blocks.value, TOOLS_NEEDED), (choice.value, CHOICE_WITHOUT_TOOLS)):
        assert refused.status_code == 400
        assert refused.body == {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": said},
        }
    assert [b.type for b in answered.content] == ["text"]
    assert server.remaining == 0 and len(server.requests) == 3


async def test_a_consultation_through_the_anthropic_model_is_a_request_the_api_takes(
    settings: Settings,
) -> None:
    settings.expert_model = EXPERT
    script = [
        Reply([tool_use("toolu_01", "propose_plan", {"steps": ["Build it"]})]),
        Reply([tool_use("toolu_02", "ask_expert", {"question": QUESTION})]),
        Reply([text(ADVICE)]),
        Reply([tool_use("toolu_03", "finish", {"answer": "Built."})]),
    ]
    async with FakeAnthropicServer(script) as server:
        async with running(settings, server) as app:
            chat = Chat(app)
            await chat.mention("build the project")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            snap = await chat.snapshot()
        bodies = [r.body for r in server.requests]

    assert snap.status.lifecycle is Lifecycle.DONE
    assert len(bodies) == 4  # every request taken: none refused with a 400
    planning, asking, consulted, after = bodies
    assert [b["model"] for b in bodies] == ["claude-test", "claude-test", EXPERT, "claude-test"]
    assert consulted["tool_choice"] == {"type": "none"}
    assert all("tool_choice" not in b for b in (planning, asking, after))
    assert consulted["tools"] == asking["tools"] and consulted["system"] == asking["system"]
    assert consulted["messages"][:-1] == asking["messages"][:-1]
    question = consulted["messages"][-1]["content"][-1]
    assert question["text"] == ASKED + QUESTION
    (result,) = [b for b in after["messages"][-1]["content"] if b.get("tool_use_id") == "toolu_02"]
    assert result["content"] == ADVICE
