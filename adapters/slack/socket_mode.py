"""Socket Mode that skips malformed envelopes instead of handing them to bolt.

slack-sdk's aiohttp ``SocketModeClient`` puts every text frame it receives on a
queue (``receive_messages`` -> ``enqueue_message``), parses it and builds a
``SocketModeRequest`` for bolt's ``AsyncSocketModeHandler.handle``
(``slack_sdk/socket_mode/async_client.py`` ``process_message`` and
``run_message_listeners``; ``slack_bolt/adapter/socket_mode/async_internals.py``).
The connection survives a bad frame, but the frame ends in a traceback in the
logs (a frame that is not JSON, a payload that is not an object) or in bolt
failing on a payload of the wrong shape, and the envelope is never acked, so
Slack sends it again (https://docs.slack.dev/apis/events-api/using-socket-mode/).

:class:`GuardedSocketModeClient` checks each frame at ``enqueue_message``, the one
method every text frame goes through: a frame that is not a JSON object, or an
envelope that fails :func:`adapters.slack.envelopes.envelope_problem`, is logged
(its envelope id and type) and skipped, and an envelope with an id is acked, so
Slack does not redeliver what the bot will never read. Everything else (``hello``,
``disconnect``, well-formed envelopes) goes on to slack-sdk unchanged.
"""

from __future__ import annotations

import logging

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient

from adapters.drops import label
from adapters.slack.envelopes import ENVELOPE_TYPES, Malformed, envelope_problem, json_object

log = logging.getLogger(__name__)

_PING_INTERVAL = 10.0
"""Seconds between pings, as bolt's ``AsyncSocketModeHandler`` sets it."""


class GuardedSocketModeClient(SocketModeClient):
    """slack-sdk's aiohttp Socket Mode client, skipping malformed frames (module docstring)."""

    async def enqueue_message(self, message: str) -> None:
        """Queue ``message`` for slack-sdk, or log and skip it (acking a bad envelope)."""
        frame = json_object(message)
        if isinstance(frame, Malformed):
            log.warning("skipped a Socket Mode frame that is not a JSON object")
            return
        if "envelope_id" not in frame and frame.get("type") not in ENVELOPE_TYPES:
            await super().enqueue_message(message)  # hello, disconnect, ...
            return
        problem = envelope_problem(frame)
        if problem is None:
            await super().enqueue_message(message)
            return
        envelope_id = frame.get("envelope_id")
        log.warning(
            "skipped Socket Mode envelope %s of type %s: %s",
            label(envelope_id),
            label(frame.get("type")),
            problem,
        )
        if isinstance(envelope_id, str) and envelope_id:
            await self._ack(envelope_id)

    async def _ack(self, envelope_id: str) -> None:
        try:
            await self.send_socket_mode_response({"envelope_id": envelope_id})
        except Exception as exc:  # the connection is slack-sdk's to mend
            log.warning("could not ack the skipped envelope %s: %r", envelope_id, exc)


class GuardedSocketModeHandler(AsyncSocketModeHandler):
    """bolt's ``AsyncSocketModeHandler`` over a :class:`GuardedSocketModeClient`.

    Built like bolt builds its own (the app's logger and Web API client, a ping
    every 10 s), without making the plain client first: that one would open an
    aiohttp session and start a task just to be thrown away.
    """

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        self.app = app
        self.app_token = app_token
        self.client = GuardedSocketModeClient(
            app_token=app_token,
            logger=app.logger,
            web_client=app.client,
            ping_interval=_PING_INTERVAL,
        )
        self.client.socket_mode_request_listeners.append(self.handle)  # type: ignore[arg-type]
