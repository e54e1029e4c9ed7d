"""Run events as chat messages: what a person sees in the thread (UX.md).

Pure functions, no I/O: :func:`render_event` turns one run event of a
conversation bound to ``binding`` into outbox rows. Wording follows UX.md: few
messages, each with one job, everything in the thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from conversations.events import Button, PlatformRef, PostReply
from conversations.store import Outgoing
from core.run_events import (
    Answered,
    ContinueAsked,
    Expired,
    PlanProposed,
    ProgressNote,
    QuestionAsked,
    Reminder,
    RunEvent,
    RunFailed,
    RunStats,
    Stopped,
    ToolApprovalRequested,
)

APPROVE = "white_check_mark"
REJECT = "x"


@dataclass(frozen=True, kw_only=True)
class RenderSettings:
    """Reactions the bot seeds on a plan (normalized names) and shows in its hints."""

    approve_emoji: str = APPROVE
    reject_emoji: str = REJECT


def render_event(
    binding: PlatformRef, event: RunEvent, settings: RenderSettings | None = None
) -> list[Outgoing]:
    """Outbox rows for ``event`` in the thread of ``binding``."""
    settings = settings or RenderSettings()
    match event:
        case ProgressNote():
            prefix = f"⏳ {event.step} · " if event.step else "⏳ "
            return [Outgoing(PostReply(ref=binding, text=prefix + event.text), purpose="note")]
        case PlanProposed():
            return [_plan(binding, event, settings)]
        case QuestionAsked():
            return [_question(binding, event)]
        case Answered():
            text = f"✅ {event.text}\n— {format_stats(event.stats)}"
            return [Outgoing(PostReply(ref=binding, text=text))]
        case RunFailed():
            return [_failure(binding, event, settings)]
        case ContinueAsked():
            text = (
                f"⏸ I've used {event.turns} model turns on this without finishing. React "
                f":{settings.approve_emoji}: or press Continue to go on, "
                f":{settings.reject_emoji}: to stop here."
            )
            buttons = (
                Button(label="Continue", action=f"approve:{event.request_id}", style="primary"),
                Button(label="Stop here", action=f"reject:{event.request_id}", style="danger"),
            )
            action = PostReply(ref=binding, text=text, buttons=buttons)
            return [Outgoing(action, request_id=event.request_id)]
        case Stopped():
            return [Outgoing(PostReply(ref=binding, text=stop_text(event)))]
        case ToolApprovalRequested():
            return [_tool_approval(binding, event, settings)]
        case Reminder():
            text = f"⏰ Still waiting for an answer here: {event.prompt.splitlines()[0]}"
            return [Outgoing(PostReply(ref=binding, text=text))]
        case Expired():
            text = "⌛ This request expired; mention me again to continue."
            return [Outgoing(PostReply(ref=binding, text=text))]
        case _:
            assert_never(event)


def stop_text(event: Stopped) -> str:
    """``⏹ Stopped by alice. 2 tool calls were cancelled.`` (counts only when non-zero)."""
    parts = [f"⏹ Stopped by {event.by_name}."]
    if event.interrupted_calls:
        parts.append(f"{_calls(event.interrupted_calls)} interrupted while running.")
    if event.cancelled_calls:
        verb = "was" if event.cancelled_calls == 1 else "were"
        parts.append(f"{_calls(event.cancelled_calls)} {verb} cancelled.")
    return " ".join(parts)


def format_stats(stats: RunStats) -> str:
    """``9 tool calls · 2m 40s · 31.5k tokens (27.9k from cache)``."""
    tokens = stats.input_tokens + stats.output_tokens
    text = f"{_calls(stats.tool_calls)} · {_duration(stats.seconds)} · {_count(tokens)} tokens"
    if stats.cache_read_tokens:
        text += f" ({_count(stats.cache_read_tokens)} from cache)"
    return text


def _plan(binding: PlatformRef, event: PlanProposed, settings: RenderSettings) -> Outgoing:
    lines = [
        f"📋 Plan (v{event.version}) — reply here to change it, or react "
        f":{settings.approve_emoji}: to approve / :{settings.reject_emoji}: to reject"
    ]
    lines += [f"{n}. {step}" for n, step in enumerate(event.steps, start=1)]
    if event.tools:
        lines.append("Tools this plan needs: " + ", ".join(event.tools))
    action = PostReply(
        ref=binding,
        text="\n".join(lines),
        buttons=(
            Button(label="Approve", action=f"approve:{event.request_id}", style="primary"),
            Button(label="Reject", action=f"reject:{event.request_id}", style="danger"),
        ),
        reactions=(settings.approve_emoji, settings.reject_emoji),
    )
    return Outgoing(action, request_id=event.request_id)


def _tool_approval(
    binding: PlatformRef, event: ToolApprovalRequested, settings: RenderSettings
) -> Outgoing:
    lines = [
        f"🔐 May I run {'this' if len(event.calls) == 1 else 'these'}? React "
        f":{settings.approve_emoji}: to allow, :{settings.reject_emoji}: to deny "
        + ("(every call still undecided), or use the buttons" if len(event.calls) > 1 else "")
    ]
    lines += [f"{c.number}. {c.summary} — {c.reason}" for c in event.calls]
    buttons: list[Button] = []
    for c in event.calls:
        suffix = f" {c.number}" if len(event.calls) > 1 else ""
        buttons.append(
            Button(
                label=f"Allow{suffix}",
                action=f"allow:{event.request_id}:{c.number}",
                style="primary",
            )
        )
        buttons.append(
            Button(
                label=f"Deny{suffix}", action=f"deny:{event.request_id}:{c.number}", style="danger"
            )
        )
    action = PostReply(
        ref=binding,
        text="\n".join(lines),
        buttons=tuple(buttons),
        reactions=(settings.approve_emoji, settings.reject_emoji),
    )
    return Outgoing(action, request_id=event.request_id)


def _failure(binding: PlatformRef, event: RunFailed, settings: RenderSettings) -> Outgoing:
    if event.request_id is None:
        text = f"⚠️ {event.error}\nReply in this thread to start again."
        return Outgoing(PostReply(ref=binding, text=text))
    text = (
        f"⚠️ {event.error}\nReact :repeat: or :{settings.approve_emoji}:, press Retry, "
        'or reply "retry" to continue from where it stopped.'
    )
    retry = Button(label="Retry", action=f"approve:{event.request_id}", style="primary")
    action = PostReply(ref=binding, text=text, buttons=(retry,))
    return Outgoing(action, request_id=event.request_id)


def _question(binding: PlatformRef, event: QuestionAsked) -> Outgoing:
    text = f"❓ {event.question}"
    if event.options:
        text += "\n" + "  ".join(f"{n}) {o}" for n, o in enumerate(event.options, start=1))
    text += "\n(reply in this thread)"
    return Outgoing(PostReply(ref=binding, text=text), request_id=event.request_id)


def _calls(n: int) -> str:
    return f"{n} tool call" + ("" if n == 1 else "s")


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m {whole % 60}s" if whole >= 60 else f"{whole}s"


def _count(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
