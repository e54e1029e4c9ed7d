"""Slack's agent sessions at the edge: the stop button's event in, and what the sender
knows of sessions per workspace (whether to call ``agents.sessions.setStatus`` at all,
what it has said about them in the log).

:func:`session_stopped` translates ``agent_session_stopped`` (a person pressed Slack's
stop button on a thread's session) into the stop command in that thread, so it is one
more way into stop, authorised as ``/stop`` is (docs/architecture.md, "One mention, one
approval, one stop"). Slack leaves the session ``processing``; the stop's own commit
moves it to ``closed`` (:mod:`conversations.sessions`), and a refused stop leaves it
working, as it is.

A thread's session shows the conversation's lifecycle (docs/architecture.md, "Agent
sessions"; https://docs.slack.dev/ai/agent-sessions). Only an app declared as an agent
may create sessions; a workspace or an app that does not allow them answers with an
error (``not_allowed``, ``missing_scope``, ``unknown_method``...). Threadbot then goes
on without them in that workspace: the refusal is logged once and no further call is
made there until the process restarts. An answer that carries the warning
``missing_agent_session_stopped_event_subscription`` keeps sessions on: Slack shows a
spinner without a stop button, and the log says so once per workspace
(https://docs.slack.dev/reference/events/agent_session_stopped).

No I/O and no SDK here: :mod:`adapters.slack.sending` makes the call and tells
:class:`AgentSessions` what came of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import cast

from adapters.drops import DropLog, label
from adapters.fields import text
from adapters.slack.translate import PLATFORM, BotIdentity
from adapters.slack.types import AgentSessionStoppedEvent, EventCallback
from conversations.events import Author, CommandInvoked, PlatformRef

log = logging.getLogger(__name__)
_dropped = DropLog("Slack", log)

NO_STOP_BUTTON = "missing_agent_session_stopped_event_subscription"
"""The warning of an app not subscribed to ``agent_session_stopped``."""


def session_stopped(
    body: EventCallback, me: BotIdentity, *, stop_command: str = "stop"
) -> CommandInvoked | None:
    """An ``agent_session_stopped`` body as the stop command (``stop_command``, without
    its slash, its means ``native_stop``) in the session's thread, from ``user``; delivery key
    ``slack:event:{event_id}``. None (logged) for a body without the event's user,
    channel or ``thread_ts``, or without ``event_id``; never raises.

    The event's fields: https://docs.slack.dev/reference/events/agent_session_stopped
    (``team_id`` is on the envelope).
    """
    event = cast(AgentSessionStoppedEvent, body.get("event") if isinstance(body, Mapping) else {})
    if not isinstance(event, Mapping):
        return _dropped("agent_session_stopped", None, "no event", malformed=True)
    event_id = text(body.get("event_id"))
    key = f"slack:event:{event_id}" if event_id else None
    kind = label(event.get("type"))
    user = text(event.get("user"))
    channel = text(event.get("channel"))
    thread = text(event.get("thread_ts"))
    team = text(body.get("team_id")) or me.team_id
    if not (user and channel and thread and key and team):
        return _dropped(kind, key, "no user, channel, thread_ts, team or event_id", malformed=True)
    return CommandInvoked(
        delivery_key=key,
        ref=PlatformRef(
            platform=PLATFORM, workspace=team, channel=channel, thread=thread, user=user
        ),
        author=Author(id=user, name=f"<@{user}>"),
        name=stop_command,
        means="native_stop",
    )


class AgentSessions:
    """Per workspace (a Slack team id): sessions refused, warnings already logged."""

    def __init__(self) -> None:
        self._refused: dict[str, str] = {}
        """Workspace -> the error Slack refused a session with."""
        self._warned: set[tuple[str, str]] = set()

    def allowed(self, workspace: str) -> bool:
        """Whether to call ``agents.sessions.setStatus`` for a thread of ``workspace``."""
        return workspace not in self._refused

    def refused(self, workspace: str, error: str) -> None:
        """Slack refused a status with ``error``: sessions are off in ``workspace`` from
        now on, said once in the log."""
        if workspace in self._refused:
            return
        self._refused[workspace] = error
        log.warning(
            "Slack agent sessions are off in workspace %s: agents.sessions.setStatus was "
            "refused (%s); threads go on without a session status. Declare the app an "
            "agent (adapters/slack/manifest.yaml) and reinstall it to have them.",
            workspace or "(unknown)",
            error,
        )

    def answered(self, workspace: str, answer: Mapping[str, object]) -> None:
        """Slack took a status; its warnings (``warning``, ``response_metadata.warnings``)
        are logged once per workspace each."""
        warnings = {w for w in (text(answer.get("warning")) or "").split(",") if w}
        metadata = answer.get("response_metadata")
        listed = metadata.get("warnings") if isinstance(metadata, Mapping) else None
        if isinstance(listed, list):
            warnings |= {w for w in listed if isinstance(w, str) and w}
        for warning in sorted(warnings):
            if (workspace, warning) in self._warned:
                continue
            self._warned.add((workspace, warning))
            if warning == NO_STOP_BUTTON:
                log.warning(
                    "Slack agent sessions in workspace %s have no stop button: the app "
                    "is not subscribed to agent_session_stopped (%s). Update the app's "
                    "manifest (adapters/slack/manifest.yaml) and reinstall it.",
                    workspace or "(unknown)",
                    warning,
                )
            else:
                log.warning(
                    "agents.sessions.setStatus in workspace %s warned: %s",
                    workspace or "(unknown)",
                    warning,
                )
