"""Traces out of the bot: the runs' spans (:mod:`core.tracing`) exported through OTLP.

Off unless OpenTelemetry's own environment variables ask for it
(https://opentelemetry.io/docs/specs/otel/protocol/exporter/ and
https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):

- ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full URL, ``.../v1/traces``) or
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the collector's base URL, ``/v1/traces`` added)
  turns the export on;
- ``OTEL_SDK_DISABLED=true``, or ``OTEL_TRACES_EXPORTER=none``, keeps it off;
- ``OTEL_SERVICE_NAME`` names the service (``threadbot`` when neither it nor
  ``OTEL_RESOURCE_ATTRIBUTES`` does); the SDK and the exporter read the others
  themselves (``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_BSP_*``, ...);
- the export is HTTP/protobuf: ``OTEL_EXPORTER_OTLP_PROTOCOL`` (or its ``TRACES_``
  form) set to anything else is a start error rather than spans that never arrive.

Only then are the OpenTelemetry SDK and the OTLP exporter imported (the ``otel``
extra: ``pip install 'threadbot[otel]'``; their absence is a start error saying so).
The spans are batched (``BatchSpanProcessor``) and flushed when the app closes.
Without the export, core's spans go to the API's no-op tracer.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from opentelemetry.trace import TracerProvider

from bot.errors import TracesUnavailable
from conversations.events import PlatformRef
from core.tracing import SpanAttributes

SERVICE = "threadbot"
"""``service.name`` of the spans when the environment names none."""
ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
PROTOCOL = "http/protobuf"
INSTALL = "pip install 'threadbot[otel]'"

PLATFORM = "threadbot.platform"
"""``slack``, ``discord`` or ``console``."""
WORKSPACE = "threadbot.workspace"
"""The Slack team or Discord guild id (absent for the console and DMs)."""
CHANNEL = "threadbot.channel"
"""The channel id of the conversation's thread (on Discord, the thread's own channel)."""
THREAD = "threadbot.thread"
"""The thread id: the Slack ``thread_ts``, the Discord thread, the console's root message."""
PARENT = "threadbot.channel.parent"
"""Where a thread is a channel of its own (Discord), the channel it was started in."""


@dataclass(frozen=True)
class Traces:
    """Where the runs' spans go, and how the export ends.

    ``provider``: the tracer provider handed to the engine (None: the global one,
    the API's no-op unless something set it). ``shutdown``: flushes the spans still
    batched and stops the export (None: nothing of the bot's to stop).
    """

    provider: TracerProvider | None = None
    shutdown: Callable[[], object] | None = None

    async def close(self) -> None:
        """Flush and stop the export, off the event loop (it blocks on the HTTP posts)."""
        if self.shutdown is not None:
            await asyncio.to_thread(self.shutdown)


OFF = Traces()
"""No export of the bot's own."""


def exporting(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``environ`` asks for the OTLP export of traces (see the module's docstring)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINTS)


def traces_from(environ: Mapping[str, str] = os.environ) -> Traces:
    """The bot's trace export as ``environ`` configures it; :data:`OFF` when it asks none.

    Raises :class:`bot.errors.TracesUnavailable` when it asks for one that cannot
    be given: the SDK or the exporter is not installed, or a protocol other than
    HTTP/protobuf. The exporter and the SDK read the process environment themselves.
    """
    if not exporting(environ):
        return OFF
    for name in PROTOCOLS:
        protocol = environ.get(name, "").strip()
        if protocol and protocol != PROTOCOL:
            raise TracesUnavailable(
                f"{name}={protocol}: threadbot exports traces over {PROTOCOL} only "
                "(a collector's OTLP/HTTP port is 4318)"
            )
    endpoint = next(name for name in ENDPOINTS if environ.get(name, "").strip())
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise TracesUnavailable(
            f"{endpoint} is set, but the OpenTelemetry SDK or its OTLP exporter is not "
            f"installed ({exc}): {INSTALL}"
        ) from exc
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE}))
    provider = SdkTracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return Traces(provider=provider, shutdown=provider.shutdown)


def place_attributes(
    binding: Callable[[str], Awaitable[PlatformRef | None]], *, keep: int = 256
) -> SpanAttributes:
    """The platform ids of a conversation's thread, by the conversation's id, for its spans
    (:data:`core.tracing.SpanAttributes`): :data:`PLATFORM`, :data:`WORKSPACE`,
    :data:`CHANNEL`, :data:`THREAD` and :data:`PARENT`, those the thread has.

    ``binding`` reads the conversation's place (a store read); the places of the last
    ``keep`` conversations are kept, since a conversation never moves.
    """
    known: OrderedDict[str, Mapping[str, str]] = OrderedDict()

    async def attributes(conversation_id: str) -> Mapping[str, str]:
        found = known.get(conversation_id)
        if found is not None:
            known.move_to_end(conversation_id)
            return found
        ref = await binding(conversation_id)
        if ref is None:
            return {}
        ids = {
            PLATFORM: ref.platform,
            WORKSPACE: ref.workspace,
            CHANNEL: ref.channel,
            THREAD: ref.thread or "",
            PARENT: ref.parent or "",
        }
        found = known[conversation_id] = {key: value for key, value in ids.items() if value}
        if len(known) > keep:
            known.popitem(last=False)
        return found

    return attributes
