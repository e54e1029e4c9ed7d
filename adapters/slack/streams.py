"""Streamed answers on Slack: ``chat.startStream`` / ``appendStream`` / ``stopStream``.

The answer's preview is streamed into one reply while the model writes it
(https://docs.slack.dev/reference/methods/chat.startStream, ``chat.appendStream``,
``chat.stopStream``; docs/architecture.md "Streamed answers"): a stream is for its
recipient (the requester) of the workspace, both required in a channel; each call
takes at most 12,000 characters of ``markdown_text``. The texts are escaped as every
text threadbot posts (:func:`adapters.slack.outbound.escape`), and what went into each
message is kept, so the answer's row finalises it exactly:

- the stream still open and the whole answer going on from what was streamed:
  ``chat.stopStream`` with the rest, the post's buttons as ``blocks`` at its bottom, and
  the outbox key in its ``metadata`` (so a post that may have gone out is found as any
  other, :mod:`adapters.slack.sending`);
- else (Slack ended the stream, ``message_not_in_streaming_state``; or the text
  differs from what was streamed): the stream is stopped if it may still be open, and
  the whole answer edited into the message with ``chat.update``;
- an answer too long for one message (:data:`MAX_TEXT`), or that goes up as a file, is
  not put in it: the stream ends with :data:`conversations.events.TOO_LONG`
  (:meth:`SlackStreams.set_aside`) and the answer is posted as before.

Every stream threadbot stops itself carries ``metadata`` (the answer's outbox key, or
:data:`STREAM_EVENT_TYPE`), so a stream a dead process left open is the bot's newest
message in the thread with none, no files, opening with a preview's mark
(:meth:`SlackStreams.left_open`, read with ``conversations.replies``).

Every call goes through the client that retries nothing (appending twice would show
the text twice) but the edit, which may be asked again. Errors: ``message_not_in_streaming_state``
becomes :class:`conversations.errors.StreamEnded`; a 429 :class:`conversations.errors.RateLimited`;
any other failure :class:`conversations.errors.DeliveryError`.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError

from adapters.slack.outbound import OUTBOX_EVENT_TYPE, button_blocks, escape, render
from adapters.slack.teams import TeamClients
from adapters.slack.web import UNREACHABLE
from conversations.errors import DeliveryError, RateLimited, StreamEnded
from conversations.events import TOO_LONG, PlatformRef, PostReply, UpdateMessage

log = logging.getLogger(__name__)

NOT_STREAMING = "message_not_in_streaming_state"
"""Slack's answer to an append or stop of a stream it ended (python-slack-sdk #1859)."""
STREAM_EVENT_TYPE = "threadbot_stream"
"""``metadata.event_type`` of a stream threadbot stopped without an answer in it (closed
as it was, or too long), so it is never taken for one left open."""
MAX_TEXT = 3_900
"""Characters of one message's text (:func:`adapters.slack.outbound.render`'s ``max_text``)."""


class SlackStreams:
    """Streams into Slack threads through ``clients`` (each thread's workspace's);
    ``limit``: characters a streamed message may hold (the smaller of :data:`MAX_TEXT`
    and the file threshold)."""

    def __init__(self, *, clients: TeamClients, limit: int) -> None:
        self._clients = clients
        self.limit = limit
        self._sent: dict[str, str] = {}
        """Each streamed message's text as sent (escaped), by ts."""

    async def start(self, thread: PlatformRef, recipient: str, text: str) -> str:
        """Start a stream in ``thread`` for ``recipient``; its message's ts."""
        escaped = escape(text)
        answer = await self._call(
            thread,
            "chat_startStream",
            channel=thread.channel,
            thread_ts=thread.thread or "",
            recipient_user_id=recipient,
            recipient_team_id=thread.workspace,
            markdown_text=escaped,
        )
        ts = str(answer.get("ts") or "")
        if not ts:
            raise DeliveryError("Slack started a stream without a ts")
        self._sent[ts] = escaped
        return ts

    async def append(self, thread: PlatformRef, ts: str, text: str) -> None:
        """Append ``text`` to the stream of ``ts``."""
        escaped = escape(text)
        await self._call(
            thread, "chat_appendStream", channel=thread.channel, ts=ts, markdown_text=escaped
        )
        self._sent[ts] = self._sent.get(ts, "") + escaped

    async def stop(self, thread: PlatformRef, ts: str, text: str) -> None:
        """Stop the stream of ``ts``, ending it with ``text`` (none when empty)."""
        escaped = escape(text)
        metadata = {"event_type": STREAM_EVENT_TYPE, "event_payload": {"closed": True}}
        await self._call(
            thread,
            "chat_stopStream",
            channel=thread.channel,
            ts=ts,
            markdown_text=escaped or None,
            metadata=metadata,
        )
        self._sent[ts] = self._sent.get(ts, "") + escaped

    async def left_open(
        self, thread: PlatformRef, bot_user: str, openings: tuple[str, ...]
    ) -> str | None:
        """The ts of a stream a process left open in ``thread``: the newest message of
        ``bot_user`` there, if it has no metadata and no files and opens with one of
        ``openings`` (see the module docstring); None when there is none, or Slack would
        not say."""
        if thread.thread is None:
            return None
        try:
            clients = await self._clients.of(thread.workspace)
        except DeliveryError:  # not installed there (any more)
            return None
        try:
            answer = await clients.client.conversations_replies(
                channel=thread.channel, ts=thread.thread, include_all_metadata=True, limit=200
            )
        except SlackApiError as exc:
            log.warning("could not look for a stream left open in %s: %r", thread.thread, exc)
            return None
        except UNREACHABLE as exc:
            log.warning("Slack could not be reached for conversations.replies: %r", exc)
            return None
        data = answer.data if isinstance(answer.data, dict) else {}
        ours = [m for m in data.get("messages") or [] if m.get("user") == bot_user]
        if not ours or ours[-1].get("ts") == thread.thread:
            return None
        newest = ours[-1]
        if newest.get("metadata") or newest.get("files"):
            return None
        opens = str(newest.get("text", "")).startswith(tuple(escape(o) for o in openings))
        return str(newest["ts"]) if opens else None

    async def set_aside(self, action: PostReply) -> None:
        """The answer of ``action`` goes as before (too long for its streamed message, or
        a file): its message ends with :data:`conversations.events.TOO_LONG` (a stop, or
        an edit where Slack ended the stream), and nothing of it is taken for an answer."""
        assert action.streamed is not None
        ts, thread = action.streamed.message, action.ref
        sent = self._sent.pop(ts, None)
        if action.streamed.open:
            try:
                await self.stop(thread, ts, TOO_LONG)
                return
            except StreamEnded:
                pass
        if sent is not None:
            metadata = {"event_type": STREAM_EVENT_TYPE, "event_payload": {"closed": True}}
            edit = UpdateMessage(ref=thread.model_copy(update={"message": ts}), text="")
            [call] = render(edit, idempotency_key="")
            args = {**call.args, "text": sent + escape(TOO_LONG), "metadata": metadata}
            args["blocks"] = []
            await self._call(thread, "chat_update", edit=True, **args)

    async def finalise(self, action: PostReply, key: str) -> str | None:
        """Finalise the streamed message with the whole of ``action`` (see the module
        docstring); its ts, or None when it must be posted as before. Raises as
        :meth:`start`, :class:`StreamEnded` aside (the answer is edited in)."""
        assert action.streamed is not None
        ts, channel = action.streamed.message, action.ref.channel
        final = escape(action.text)
        sent = self._sent.get(ts)
        metadata = {"event_type": OUTBOX_EVENT_TYPE, "event_payload": {"key": key, "part": 0}}
        if action.streamed.open and sent is not None and final.startswith(sent):
            rest = final[len(sent) :]
            try:
                await self._call(
                    action.ref,
                    "chat_stopStream",
                    channel=channel,
                    ts=ts,
                    metadata=metadata,
                    markdown_text=rest or None,
                    blocks=button_blocks(action.buttons) or None,
                )
                self._sent.pop(ts, None)
                return ts
            except StreamEnded:
                pass  # Slack ended it meanwhile: edited in below
        elif action.streamed.open:
            try:
                await self._call(action.ref, "chat_stopStream", channel=channel, ts=ts)
            except StreamEnded:
                pass
        self._sent.pop(ts, None)
        if len(final) > MAX_TEXT:
            return None  # one edit cannot hold it: posted as before, in parts or a file
        message = action.ref.model_copy(update={"message": ts})
        edit = UpdateMessage(ref=message, text=action.text, buttons=action.buttons)
        [call] = render(edit, idempotency_key=key)
        await self._call(action.ref, "chat_update", edit=True, metadata=metadata, **call.args)
        return ts

    async def _call(
        self, where: PlatformRef, method: str, *, edit: bool = False, **args: Any
    ) -> dict[str, Any]:
        """``client.<method>(**args)`` of ``where``'s workspace, the edit client's for
        ``edit``; its answer's data."""
        clients = await self._clients.of(where.workspace)
        client = clients.edit_client if edit else clients.post_client
        try:
            response = await getattr(client, method)(**args)
        except SlackApiError as exc:
            raise _stream_error(exc) from exc
        except UNREACHABLE as exc:
            log.warning("Slack could not be reached for %s: %r", method, exc)
            raise DeliveryError("Slack could not be reached (the connection failed)") from exc
        data = response.data
        return data if isinstance(data, dict) else {}


def _stream_error(exc: SlackApiError) -> DeliveryError:
    """A refused stream call in words: ended, a 429, or Slack's refusal."""
    response = exc.response
    status = getattr(response, "status_code", None) or getattr(response, "status", 0)
    data = getattr(response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    if code == NOT_STREAMING:
        return StreamEnded(f"Slack ended the stream ({code})")
    if status == 429:
        retry = response.headers.get("Retry-After") if hasattr(response, "headers") else None
        return RateLimited("Slack asked to slow down (HTTP 429)", retry_after=float(retry or 1))
    return DeliveryError(f"Slack refused it ({code})" if code else f"Slack answered HTTP {status}")
