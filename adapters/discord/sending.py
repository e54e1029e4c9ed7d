"""The Discord sender: a neutral action in, REST calls sent, the new message's id out.

:meth:`DiscordSender.send` renders the action (:mod:`adapters.discord.outbound`) and
sends the calls through discord.py's HTTP client (:mod:`adapters.discord.rest`), so
its rate-limit buckets apply (it sleeps on a 429 and retries). Every posted message
carries a ``nonce`` derived from the outbox key with ``enforce_nonce``: Discord
returns the first message for a second post with the same nonce within a few
minutes (https://discord.com/developers/docs/resources/message#create-message), so
a redelivery (``maybe_sent``) posts nothing twice. A post to an archived thread
(error code 50083) unarchives it and tries once more. A long answer that asks for
nothing goes up as a file (:mod:`adapters.limits`). A reply to one person alone
while the runner hands over their command answers the command, seen by them only
(:mod:`adapters.discord.answers`). A thread's session status keeps its typing
indicator on while the run works (``processing``) and lets it fade otherwise
(:mod:`adapters.discord.typing`).
"""

from __future__ import annotations

import io
import logging
from typing import Any, cast

import discord

from adapters.discord.answers import CommandAnswers, OpenCommand
from adapters.discord.outbound import (
    RestCall,
    command_answer,
    message_channel,
    render,
    seed_reactions,
    start_thread,
)
from adapters.discord.rest import REST_FAILURES, UNREACHABLE, channel_of, request
from adapters.discord.types import Message
from adapters.discord.typing import EVERY as TYPING_EVERY
from adapters.discord.typing import TypingIndicator
from adapters.limits import answer_file_name, file_summary
from conversations.errors import DeliveryError, NotConnected
from conversations.events import (
    AddReaction,
    OutboundAction,
    PostReply,
    SetSessionStatus,
    StartThread,
)
from conversations.feedback import feedback_only

log = logging.getLogger(__name__)

THREAD_ARCHIVED = 50083
"""Error code: the thread is archived (https://discord.com/developers/docs/topics/opcodes-and-status-codes#json)."""
THREAD_EXISTS = 160004
"""Error code: a thread has already been created for this message (a redelivery)."""


LOGIN_WAIT = 1.0
"""Seconds a message waits when the client has not logged in yet (the process starts
delivering what was pending before the adapter has connected)."""


class DiscordSender:
    """Sends neutral actions through ``client`` (logged in by the adapter).

    ``file_threshold``: characters past which a reply with no buttons or reactions
    (an answer) is attached as a file. ``answers``: the commands the runner is
    handing over, whose ephemeral deferral takes a reply to their user alone (a new,
    empty one when not given: every reply is posted).
    """

    def __init__(
        self,
        *,
        client: discord.Client,
        file_threshold: int,
        answers: CommandAnswers | None = None,
        typing_every: float = TYPING_EVERY,
    ) -> None:
        self._client = client
        self._file_threshold = file_threshold
        self._answers = answers or CommandAnswers()
        self.typing = TypingIndicator(trigger=self._trigger_typing, every=typing_every)
        """The threads whose typing indicator is kept on (a run works there)."""

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action``; the id of the (last) new message for a post, else None.

        ``maybe_sent`` needs nothing more: every message goes with a nonce derived
        from ``idempotency_key`` and ``enforce_nonce``, and Discord returns the
        message already posted with that nonce instead of posting it again. Raises
        :class:`DeliveryError` (``permanent`` for a 4xx other than 429, and for any
        failed reaction) when Discord refused or could not be reached, and
        :class:`NotConnected` before the client has logged in (discord.py's HTTP client
        has no session until then).
        """
        if self._client.http.token is None:  # discord.py sends nothing before its login
            raise NotConnected(
                f"Discord is not logged in yet; {action.kind} waits", retry_after=LOGIN_WAIT
            )
        try:
            if isinstance(action, PostReply):
                command = self._answers.answering(action)
                if command is not None:
                    return await self._answer(action, command)
                return await self._post(action, idempotency_key)
            if isinstance(action, StartThread):
                return await self._start_thread(action, idempotency_key)
            if isinstance(action, SetSessionStatus):  # no sessions: the typing indicator
                channel = message_channel(action.ref)
                if action.status == "processing":
                    await self.typing.start(channel)
                else:
                    await self.typing.stop(channel)
                return None
            for call in render(action, nonce=idempotency_key):
                await self._call(call)
            return None
        except discord.HTTPException as exc:
            raise _delivery_error(exc, action) from exc
        except UNREACHABLE as exc:
            log.warning("Discord could not be reached for %s: %r", action.kind, exc)
            reason = (
                "Discord did not answer in time"
                if isinstance(exc, TimeoutError)
                else "Discord could not be reached (the connection failed)"
            )
            raise DeliveryError(reason) from exc

    async def _trigger_typing(self, channel: str) -> None:
        """``POST /channels/{channel}/typing`` (Trigger Typing Indicator)."""
        await request(self._client, RestCall("POST", f"/channels/{channel}/typing", None))

    async def _post(self, action: PostReply, key: str) -> str | None:
        """Post the reply's messages (or its file); the last one's id, from Create Message's
        answer (a :class:`~adapters.discord.types.Message`)."""
        if self._as_file(action):
            call, file = self._file_call(action, key), _answer_file(key, action)
            message = cast(Message, await self._call(call, file=file))
            return str(message.get("id")) if message else None
        last = cast(Message, {})
        for call in render(action, nonce=key):
            last = cast(Message, await self._call(call))
        message_id = str(last.get("id") or "") or None
        if message_id is not None and action.reactions:
            channel = str(last.get("channel_id") or "")
            await self._seed(action, channel, message_id)
        return message_id

    async def _start_thread(self, action: StartThread, key: str) -> str | None:
        """Post ``action``'s message at the top of its channel (its nonce makes a
        redelivery return the message posted before), then start a thread on it; the
        thread's id, which is the message's. A thread started before (a redelivery:
        error 160004) is the one."""
        message_id = await self._post(action.post(), key)
        if message_id is None:
            return None
        try:
            await request(self._client, start_thread(action.ref.channel, message_id, action.text))
        except discord.HTTPException as exc:
            if exc.code != THREAD_EXISTS:
                raise
        return message_id

    async def _answer(self, action: PostReply, command: OpenCommand) -> str | None:
        """Answer the open ``command`` with ``action``, to its user alone; the last
        message's id. The first part fills the command's deferral, once."""
        last: dict[str, Any] = {}
        calls = command_answer(
            action,
            application=command.application,
            token=command.token,
            original=not command.answered,
        )
        for call in calls:
            last = await request(self._client, call)
            command.answered = True
        return str(last.get("id") or "") or None

    def _as_file(self, action: PostReply) -> bool:
        """A long reply that asks for nothing (its buttons, if any, are the feedback
        buttons, which a file drops) goes up as a file."""
        plain = feedback_only(action.buttons) and not action.reactions
        return plain and len(action.text) > self._file_threshold

    def _file_call(self, action: PostReply, key: str) -> RestCall:
        """The first message of the reply, cut to its first line, to carry the file."""
        summary = action.model_copy(update={"text": file_summary(action.text)})
        [call] = render(summary, nonce=key)[:1]
        return call

    async def _seed(self, action: PostReply, channel: str, message_id: str) -> None:
        """Add the bot's reactions to its new message; a failure is only logged."""
        for call in seed_reactions(action, channel, message_id):
            try:
                await self._call(call)
            except REST_FAILURES as exc:
                log.warning("could not react on %s: %s", message_id, exc)

    async def _call(self, call: RestCall, *, file: discord.File | None = None) -> dict[str, Any]:
        """Send one call; a post to an archived thread unarchives it and tries once more."""
        try:
            return await request(self._client, call, file)
        except discord.HTTPException as exc:
            channel = channel_of(call)
            if exc.code != THREAD_ARCHIVED or channel is None:
                raise
        log.info("thread %s is archived: unarchiving it to post", channel)
        unarchive = RestCall("PATCH", f"/channels/{channel}", {"archived": False})
        await request(self._client, unarchive)
        return await request(self._client, call, file)


def _answer_file(key: str, action: PostReply) -> discord.File:
    return discord.File(io.BytesIO(action.text.encode()), filename=answer_file_name(key))


def _delivery_error(exc: discord.HTTPException, action: OutboundAction) -> DeliveryError:
    status = exc.status
    permanent = (400 <= status < 500 and status != 429) or isinstance(action, AddReaction)
    if status >= 500:
        return DeliveryError(
            f"Discord answered with a server error (HTTP {status})", permanent=permanent
        )
    detail = f"HTTP {status}, code {exc.code}"
    said = " ".join(str(exc.text or "").split())[:200]
    return DeliveryError(
        f"Discord refused it ({detail}: {said})" if said else f"Discord refused it ({detail})",
        permanent=permanent,
    )
