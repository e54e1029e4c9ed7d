"""Traces (issue 16): a span per run, its model calls and tool calls as child spans.

A plan, its approval by a reaction, tool calls and the answer, with the real
Anthropic model against the local Messages API fake (usage with cache reads and
writes, a price sheet) and an SDK tracer provider whose spans go to the
in-memory exporter. Asserted: one run span per engine entry point, each model call
and tool call a child of its run's span, the GenAI attributes equal to the usage
the fake reported, the cost equal to the priced cost (worked by hand, and as
journaled), each tool call's name, final state and duration, and the
conversation and platform ids on every span; no message text on any. Then: runs of
two conversations at once keep their spans apart; nothing is recorded outside a
run; without a provider the bot imports no SDK; with ``OTEL_EXPORTER_OTLP_ENDPOINT``
set the spans reach a local OTLP/HTTP collector; a missing SDK is a start error.
"""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from bot.app import build
from bot.errors import TracesUnavailable
from bot.settings import ModelPrice, Settings
from bot.tracing import OFF, traces_from
from core import tracing
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import AssistantTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.tool_records import ToolState
from tests.conftest import wait_for
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply, text, tool_use
from tests.harness import Chat
from tests.test_cache_prefix import running

ROOT = Path(__file__).resolve().parents[1]
PRICE = ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75)
"""Dollars per million tokens of the fake's model, ``claude-test``."""

REQUEST = "write a.md, then tell me what is in the folder"
SCRIPT = [
    Reply(
        [text("A plan to follow."), tool_use("toolu_01", "propose_plan", {"steps": ["Write"]})],
        input_tokens=1_200,
        output_tokens=80,
        cache_creation_input_tokens=3_000,
    ),
    Reply(
        [
            tool_use("toolu_02", "list_files", {}),
            tool_use("toolu_03", "read_file", {"path": "missing.md"}),
            tool_use("toolu_04", "write_file", {"path": "a.md", "content": "secret draft\n"}),
        ],
        input_tokens=150,
        output_tokens=60,
        cache_read_input_tokens=3_333,
        cache_creation_input_tokens=1_400,
    ),
    Reply(
        [tool_use("toolu_05", "finish", {"answer": "Written down."})],
        input_tokens=90,
        output_tokens=41,
        cache_read_input_tokens=4_401,
        cache_creation_input_tokens=301,
    ),
]
# Per model call, as the GenAI conventions count for Anthropic (input + cache reads
# + cache writes), and the cost in µ$ (tokens x $/MTok), rounded half-up per call:
#   1: 1,200 + 0 + 3,000 = 4,200 in;      1,200 x 3 + 80 x 15 + 3,000 x 3.75 = 16,050
#   2: 150 + 3,333 + 1,400 = 4,883 in;    450 + 900 + 999.9 + 5,250 = 7,599.9 -> 7,600
#   3: 90 + 4,401 + 301 = 4,792 in;       270 + 615 + 1,320.3 + 1,128.75 = 3,334.05 -> 3,334
MODEL_CALLS = [
    {"input": 4_200, "output": 80, "cache_read": 0, "cache_write": 3_000, "cost": 16_050},
    {"input": 4_883, "output": 60, "cache_read": 3_333, "cache_write": 1_400, "cost": 7_600},
    {"input": 4_792, "output": 41, "cache_read": 4_401, "cache_write": 301, "cost": 3_334},
]
OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
)


@pytest.fixture(autouse=True)
def no_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests say which OpenTelemetry variables are set; the machine's do not count."""
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@dataclass
class Spans:
    """This test's own SDK tracer provider and the spans it finished, in memory (the
    global provider is never set, so each test starts from none)."""

    provider: TracerProvider = field(default_factory=TracerProvider)
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)

    def __post_init__(self) -> None:
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()


@pytest.fixture
def spans() -> Iterator[Spans]:
    found = Spans()
    yield found
    found.provider.shutdown()


def runs(finished: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The run spans, in the order the runs started."""
    found = [s for s in finished if s.name == "invoke_agent threadbot"]
    return sorted(found, key=lambda s: s.start_time or 0)


def children(finished: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    """The spans whose parent is ``parent``, in the order they started."""
    assert parent.context is not None
    found = [s for s in finished if s.parent and s.parent.span_id == parent.context.span_id]
    return sorted(found, key=lambda s: s.start_time or 0)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def values(span: ReadableSpan) -> list[str]:
    """Every attribute value of ``span`` and of its events, as text."""
    found = [str(v) for v in (span.attributes or {}).values()]
    for event in span.events:
        found += [str(v) for v in (event.attributes or {}).values()]
    return found


async def test_a_run_is_a_span_with_its_model_calls_and_tool_calls_as_children(
    settings: Settings, spans: Spans
) -> None:
    settings.prices = {"claude-test": PRICE}
    async with FakeAnthropicServer(SCRIPT) as server:
        async with running(settings, server, tracer_provider=spans.provider) as app:
            chat = Chat(app)
            await chat.mention(REQUEST)
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE

    finished = spans.finished()
    start, decide, run = runs(finished)
    # One span per engine entry point: the mention's start (its run goes on inside
    # it), the reaction's decision, and the run that goes on after it.
    assert [attributes(s)["threadbot.run.entry"] for s in (start, decide, run)] == [
        "start",
        "decide",
        "run",
    ]
    assert all(s.parent is None for s in (start, decide, run))
    assert all(s.kind is SpanKind.INTERNAL for s in (start, decide, run))
    entered = [  # each workflow state entered is a span of the run that entered it
        attributes(s)["threadbot.workflow.state"]
        for s in finished
        if s.name == "threadbot.workflow.state"
    ]
    assert entered == ["planning", "approval", "executing", "answered"]
    assert [s.name for s in children(finished, decide)] == ["threadbot.workflow.state"]
    finished = [s for s in finished if s.name != "threadbot.workflow.state"]
    first = children(finished, start)
    after = children(finished, run)
    assert [s.name for s in first] == ["chat claude-test"]
    assert [s.name for s in after] == [
        "chat claude-test",
        "execute_tool list_files",
        "execute_tool read_file",
        "execute_tool write_file",
        "chat claude-test",
    ]
    assert len(finished) == 3 + len(first) + len(after)  # nothing else, nothing left over

    # Every span: the conversation and the thread's platform ids, and its run's id.
    place = {
        "gen_ai.conversation.id": snap.id,
        "threadbot.platform": "console",
        "threadbot.channel": "console",
        "threadbot.thread": chat.thread,
    }
    for parent, spans_of_run in ((start, [start, *first]), (decide, [decide]), (run, after)):
        for span in [parent, *spans_of_run]:
            assert attributes(span).items() >= place.items(), span.name
            assert "threadbot.workspace" not in attributes(span)  # the console has none
            assert attributes(span)["threadbot.run.id"] == attributes(parent)["threadbot.run.id"]
    assert attributes(start)["gen_ai.operation.name"] == "invoke_agent"
    assert attributes(start)["gen_ai.agent.name"] == "threadbot"

    # Model calls: the GenAI attributes are the fake's usage, the cost the priced one,
    # and both agree with what the journal keeps of each call (run included).
    model_spans = [first[0], after[0], after[-1]]
    entries = ["start", "run", "run"]
    turns = [r.entry for r in snap.journal if isinstance(r.entry, AssistantTurn)]
    assert len(turns) == 3
    for span, expected, turn, entry in zip(model_spans, MODEL_CALLS, turns, entries, strict=True):
        assert span.kind is SpanKind.CLIENT
        assert span.status.status_code is StatusCode.UNSET
        assert turn.usage is not None
        assert attributes(span) == {
            **place,
            "threadbot.run.id": turn.usage.run_id,
            "threadbot.run.entry": entry,
            "gen_ai.agent.name": "threadbot",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.system": "anthropic",
            "gen_ai.request.model": "claude-test",
            "gen_ai.request.max_tokens": settings.max_tokens,
            "gen_ai.response.model": "claude-test",
            "gen_ai.response.finish_reasons": ("tool_use",),
            "gen_ai.usage.input_tokens": expected["input"],
            "gen_ai.usage.output_tokens": expected["output"],
            "gen_ai.usage.cache_read.input_tokens": expected["cache_read"],
            "gen_ai.usage.cache_creation.input_tokens": expected["cache_write"],
            "threadbot.usage.cost_micro_usd": expected["cost"],
        }
        assert turn.usage.cost_micro_usd == expected["cost"]
        assert expected["input"] == (
            turn.usage.input_tokens + turn.usage.cache_read_tokens + turn.usage.cache_write_tokens
        )

    # Tool calls: name, call id, final state as recorded, duration inside the run's.
    tools = after[1:-1]
    for span in tools:
        tool_use_id = attributes(span)["gen_ai.tool.call.id"]
        record = snap.tool_calls[tool_use_id]
        assert attributes(span)["gen_ai.tool.name"] == record.name
        assert attributes(span)["gen_ai.operation.name"] == "execute_tool"
        assert attributes(span)[tracing.TOOL_STATE] == record.state.value
        assert span.kind is SpanKind.INTERNAL
        assert span.start_time is not None and span.end_time is not None
        assert run.start_time is not None and run.end_time is not None
        assert run.start_time <= span.start_time < span.end_time <= run.end_time
    listed, missing, written = tools
    assert [snap.tool_calls[attributes(s)["gen_ai.tool.call.id"]].state for s in tools] == [
        ToolState.DONE,
        ToolState.FAILED,
        ToolState.DONE,
    ]
    assert missing.status.status_code is StatusCode.ERROR
    assert attributes(missing)["error.type"] == "failed"
    assert listed.status.status_code is written.status.status_code is StatusCode.UNSET

    # Ids and counts only: no words of the thread, the model, a file or the key.
    everything = [v for s in finished for v in values(s)]
    for said in (REQUEST, "A plan to follow.", "Written down.", "secret draft", "test-key"):
        assert not any(said in v for v in everything), said


async def test_runs_of_two_conversations_at_once_keep_their_spans_apart(
    settings: Settings, spans: Spans
) -> None:
    gate = asyncio.Event()
    held = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "First answer."})], gate=gate)
    model = ScriptedModel(
        [
            held,
            ScriptedTurn(calls=[ScriptedCall("list_files")]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Second."})]),
        ]
    )
    app = await build(settings, model=model, tracer_provider=spans.provider)
    async with app:
        one, two = Chat(app), Chat(app)
        await one.mention("first", settle=False)
        await held.started.wait()  # the first run waits inside its model call...
        await two.mention("second", settle=False)

        async def second_done() -> bool:
            return (await two.snapshot()).status.lifecycle is Lifecycle.DONE

        await wait_for(second_done)  # ...while the second one runs to its answer
        gate.set()
        await app.hub.settled()
        first, second = await one.snapshot(), await two.snapshot()
    assert first.status.lifecycle is Lifecycle.DONE

    finished = [s for s in spans.finished() if s.name != "threadbot.workflow.state"]
    started = runs(finished)
    assert len(started) == 2 and all(s.parent is None for s in started)  # a trace each
    by_conversation = {attributes(s)["gen_ai.conversation.id"]: s for s in started}
    assert set(by_conversation) == {first.id, second.id}
    for conversation, thread in ((first, one.thread), (second, two.thread)):
        parent = by_conversation[conversation.id]
        assert attributes(parent)["threadbot.thread"] == thread
        for span in children(finished, parent):
            assert attributes(span)["gen_ai.conversation.id"] == conversation.id
            assert attributes(span)["threadbot.thread"] == thread
    assert [s.name for s in children(finished, by_conversation[first.id])] == ["chat scripted"]
    assert [s.name for s in children(finished, by_conversation[second.id])] == [
        "chat scripted",
        "execute_tool list_files",
        "chat scripted",
    ]
    assert len(finished) == 2 + 1 + 3


async def test_spans_are_recorded_within_a_run_only_and_a_failure_says_no_words(
    spans: Spans,
) -> None:
    traced = tracing.Tracing(provider=spans.provider)
    async with traced.run("run", "c1", "r1") as run_span:
        with run_span.model_call("claude-test", max_tokens=10):
            pass
        with run_span.tool_call("list_files", "toolu_1"):  # its final state never told
            pass
    with tracing.NO_SPAN.model_call("claude-test", max_tokens=10):  # no run: not recorded
        pass
    with tracing.NO_SPAN.tool_call("list_files", "toolu_2") as no_span:
        no_span.ended(ToolState.DONE)
    with pytest.raises(RuntimeError):
        async with traced.run("run", "c2", "r3"):
            raise RuntimeError("the words of a message")

    chat, tool, run, failed = spans.finished()
    assert [s.name for s in (chat, tool, run)] == [
        "chat claude-test",
        "execute_tool list_files",
        "invoke_agent threadbot",
    ]
    assert run.context is not None and failed.parent is None
    assert chat.parent == tool.parent == run.context
    assert attributes(run)["threadbot.run.id"] == attributes(tool)["threadbot.run.id"] == "r1"
    assert tracing.TOOL_STATE not in attributes(tool)
    assert tool.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert attributes(failed)["error.type"] == "RuntimeError"
    assert not failed.status.description and not failed.events
    assert not any("words" in v for v in values(failed))


PROBE = """
import asyncio, io, sys
from pathlib import Path
from bot.app import build
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from opentelemetry import trace
from tests.harness import Chat

async def main():
    settings = Settings(database_url="memory://", workspace_root=Path("ws"), progress_interval=0)
    hello = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Hello there."})])
    app = await build(settings, model=ScriptedModel([hello]))
    async with app:
        chat = Chat(app)
        await chat.mention("hi")
        print("said:", chat.said()[-1])
    print("sdk:", sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
    print("provider:", type(trace.get_tracer_provider()).__name__)

asyncio.run(main())
"""


def test_without_an_endpoint_the_bot_runs_on_the_no_op_api_and_imports_no_sdk(
    tmp_path: Path,
) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "THREADBOT_", "ANTHROPIC_"))
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env | {"PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "said: ✅ Hello there.",
        "sdk: []",
        "provider: ProxyTracerProvider",
    ]


class Collector:
    """A local OTLP/HTTP collector: every ``POST /v1/traces`` body, decoded."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _traces(self, request: web.Request) -> web.Response:
        self.content_types.append(request.content_type)
        self.requests.append(ExportTraceServiceRequest.FromString(await request.read()))
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def __aenter__(self) -> Collector:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def spans(self) -> list[tuple[Mapping[str, Any], str, dict[str, Any]]]:
        """``(resource attributes, span name, span attributes)`` of every span received."""
        found = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        names = {a.key: _value(a.value) for a in span.attributes}
                        found.append((resource, span.name, names))
        return found


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


async def test_an_otlp_endpoint_exports_the_spans_to_the_collector(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(
        [ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Hello there."})])]
    )
    async with Collector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        app = await build(settings, model=model)
        async with app:
            chat = Chat(app)
            await chat.mention("hi")
            conversation = (await chat.snapshot()).id
        # Closing the app flushed the batch: the spans are at the collector now.
        received = collector.spans()
    assert collector.content_types and set(collector.content_types) == {"application/x-protobuf"}
    assert [(r["service.name"], name) for r, name, _ in received] == [
        ("threadbot", "threadbot.workflow.state"),  # planning entered
        ("threadbot", "chat scripted"),
        ("threadbot", "threadbot.workflow.state"),  # answered
        ("threadbot", "invoke_agent threadbot"),
    ]
    for _resource, _name, names in received:
        assert names["gen_ai.conversation.id"] == conversation
        assert names["threadbot.platform"] == "console"


def test_the_environment_turns_the_export_on_and_off() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert traces_from({}) is OFF
    assert traces_from({**endpoint, "OTEL_SDK_DISABLED": "true"}) is OFF
    assert traces_from({**endpoint, "OTEL_TRACES_EXPORTER": "none"}) is OFF
    assert traces_from({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}) is OFF
    with pytest.raises(TracesUnavailable, match="http/protobuf only"):
        traces_from({**endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(TracesUnavailable, match="http/protobuf only"):
        traces_from(
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "x",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
            }
        )


def test_an_endpoint_without_the_sdk_is_a_start_error_naming_the_extra(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "sys.modules['opentelemetry.sdk'] = None  # as if the otel extra were not installed\n"
        "from bot.cli import main\n"
        "sys.exit(main(['console']))\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "THREADBOT_", "ANTHROPIC_"))
    }
    env |= {"PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input="hello\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "OTEL_EXPORTER_OTLP_ENDPOINT is set" in done.stderr
    assert "pip install 'threadbot[otel]'" in done.stderr
    assert "[1] you: hello" not in done.stdout  # it stopped before taking any request


def test_core_imports_the_opentelemetry_api_only() -> None:
    """core/ makes spans with the API (a no-op without an SDK); only bot/tracing.py may
    import the SDK or an exporter, and only when the environment asks for the export."""
    imported: dict[str, set[str]] = {}
    for package in ("core", "conversations", "adapters", "bot"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            names |= {
                n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
            }
            found = {name for name in names if name.split(".")[0] == "opentelemetry"}
            if found:
                imported[str(path.relative_to(ROOT))] = found
    api = {"opentelemetry", "opentelemetry.trace"}
    assert {path: names - api for path, names in imported.items() if names - api} == {
        "bot/tracing.py": {
            "opentelemetry.exporter.otlp.proto.http.trace_exporter",
            "opentelemetry.sdk.resources",
            "opentelemetry.sdk.trace",
            "opentelemetry.sdk.trace.export",
        }
    }
    assert "core/tracing.py" in imported
