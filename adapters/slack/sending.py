"""The Slack sender: a neutral action in, Web API calls made, the new message's ts out.

:meth:`SlackSender.send` renders the action into Web API calls
(:mod:`adapters.slack.outbound`) and makes them through the clients of
:mod:`adapters.slack.web`. No call that changes something goes through slack-sdk's
rate-limit retry handler: a 429 becomes :class:`conversations.errors.RateLimited`
with the ``Retry-After`` seconds at once
(https://docs.slack.dev/apis/web-api/rate-limits). The deliverer owns those waits,
per conversation: a conversation waiting out a rate limit gives its worker slot to
others, the wait is visible and interruptible (a shutdown), and status edits
refused meanwhile are merged into one later edit. Sleeping inside ``send`` instead
would hide the wait, hold a worker, and give up after its retries as if it were a
failure.

A message that may have been posted already (before a crash, or by an attempt
that failed part-way or lost Slack's answer) is looked up by its outbox key in the
thread's ``metadata`` (a file by its name), and only its missing parts are posted;
an answer of which nothing is found finalises its streamed preview as any other (a
stream a killed process left open included: docs/architecture.md "Streamed answers").
A dropped connection or a timeout is a transient :class:`DeliveryError`; the bot's
reactions are seeded after the post, and a failure to seed one is logged, never a
reason to post the message again. A long answer that asks for nothing goes up as a
file (:mod:`adapters.limits`). A plan's card that Slack refuses (``invalid_blocks``: a
workspace without plan blocks) goes again at once without it, and so does every plan
of that workspace until a restart (docs/architecture.md, "Plan cards").

Every failure is said in words (:mod:`adapters.slack.refusals`); the detail of a
connection failure goes to the log, not into the message.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from slack_sdk.errors import SlackApiError

from adapters.fields import mapping, mappings, text
from adapters.limits import answer_file_name, file_summary
from adapters.slack.outbound import ApiCall, escape, render, seed_reactions, session_call
from adapters.slack.refusals import answer_of, delivery_error, unreachable
from adapters.slack.sessions import AgentSessions
from adapters.slack.streams import MAX_TEXT, SlackStreams
from adapters.slack.teams import TeamClients
from adapters.slack.types import ConversationsReplies, PostMessageAnswer
from adapters.slack.web import UNREACHABLE, WebClients
from conversations.errors import DeliveryError
from conversations.events import (
    OutboundAction,
    PostReply,
    SetSessionStatus,
    StartThread,
)
from conversations.feedback import feedback_only

log = logging.getLogger(__name__)

STREAM_CHARS = 3_000
"""Characters of an answer's preview streamed into one message: its footer and mention
still fit one message's text (3,900) when the answer is edited in whole."""

_REPLIES_LIMIT = 200
"""Messages of a thread read when looking for a half-sent post."""


class SlackSender:
    """Sends neutral actions through ``clients``: each action through the clients of its
    workspace (:mod:`adapters.slack.teams`).

    ``file_threshold``: characters past which a reply with no buttons, reactions or
    ephemeral recipient (an answer) is uploaded as a file instead.
    """

    def __init__(self, *, clients: TeamClients, file_threshold: int) -> None:
        self._clients = clients
        self._file_threshold = file_threshold
        self.sessions = AgentSessions()
        """Where agent sessions are refused, and the warnings logged (per workspace)."""
        self.streams = SlackStreams(clients=clients, limit=min(STREAM_CHARS, file_threshold))
        """The answers streamed while they are written, finalised by their posts."""
        self._plain_plans: set[str] = set()
        """Workspaces that refused a plan block: their plans go out as plain messages."""
        self._unsure: set[str] = set()
        """Keys of posts that failed after a part went out, or with no answer: looked up
        before they are posted again."""

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action``; the ts of the (last) new message for a post, else None.

        Raises :class:`RateLimited` (with ``Retry-After``) for any call refused with
        429, at once, and :class:`DeliveryError` (``permanent`` for errors that a
        retry cannot fix) when Slack refused or could not be reached (a dropped
        connection, a timeout: transient), or the app is not installed in the action's
        workspace (:class:`adapters.slack.errors.NotInstalled`, permanent).
        """
        clients = await self._clients.of(action.ref.workspace)
        try:
            try:
                return await self._perform(clients, action, idempotency_key, maybe_sent)
            except SlackApiError as exc:
                if not self._plain_plans_after(action, exc):
                    raise
                return await self._perform(clients, action, idempotency_key, maybe_sent)
        except SlackApiError as exc:
            raise delivery_error(exc, action) from exc
        except UNREACHABLE as exc:
            log.warning("Slack could not be reached for %s: %r", action.kind, exc)
            raise DeliveryError(unreachable(exc)) from exc

    async def _perform(
        self, clients: WebClients, action: OutboundAction, idempotency_key: str, maybe_sent: bool
    ) -> str | None:
        """:meth:`send`'s calls through ``clients`` (the action's workspace's), each Slack
        refusal raised as ``SlackApiError``."""
        if isinstance(action, PostReply):
            return await self._post(clients, action, idempotency_key, maybe_sent)
        if isinstance(action, StartThread):  # the top-level post's ts is the thread's
            return await self._post(clients, action.post(), idempotency_key, maybe_sent)
        if isinstance(action, SetSessionStatus):
            await self._set_status(clients, action)
            return None
        plans = action.ref.workspace not in self._plain_plans
        for call in render(action, idempotency_key=idempotency_key, plans=plans):
            await self._call(clients, call, ignore=("already_reacted",))
        return None

    def _plain_plans_after(self, action: OutboundAction, exc: SlackApiError) -> bool:
        """Whether ``action``, a plan's card Slack refused with ``invalid_blocks`` (a
        workspace without plan blocks), is to go again as a plain message: then every
        plan of its workspace does, until a restart, and it is logged once."""
        card = getattr(action, "plan", None)
        workspace = action.ref.workspace
        if card is None or answer_of(exc)[1] != "invalid_blocks":
            return False
        if workspace in self._plain_plans:
            return False
        self._plain_plans.add(workspace)
        log.warning(
            "Slack refused a plan block in workspace %s (invalid_blocks): its plans go out "
            "as plain messages until a restart",
            workspace,
        )
        return True

    async def _post(
        self, clients: WebClients, action: PostReply, key: str, maybe_sent: bool
    ) -> str | None:
        """Post ``action`` (its parts, or a file), each part once, then seed its reactions.

        A post that failed after a part went out, or whose fate is unknown (no
        answer, a 5xx), is looked up like a ``maybe_sent`` one when it is tried
        again, so no part is posted twice and none is left out.

        An answer with a streamed preview (``action.streamed``) finalises its message
        (:class:`adapters.slack.streams.SlackStreams`) unless some of it is found
        posted already: a ``maybe_sent`` one too, such as the answer of a run resumed
        after its process was killed, whose stream, left open by the dead process, is
        so closed with the answer in it rather than left half written beside a second
        copy (docs/architecture.md "Streamed answers").
        """
        if action.ephemeral_to:  # nothing to find it by later, and no reactions
            ts: str | None = None
            for call in render(action, idempotency_key=key):
                answer = cast(PostMessageAnswer, await self._call(clients, call))
                ts = str(answer.get("message_ts") or answer.get("ts") or "") or ts
            return ts
        posted: dict[int, str] = {}
        if maybe_sent or key in self._unsure:
            posted = await self._already_posted(clients, action, key)
        if action.streamed is not None and not posted:
            if self._as_file(action) or len(escape(action.text)) > MAX_TEXT:
                await self.streams.set_aside(action)  # the answer goes as before
            elif (finalised := await self.streams.finalise(action, key)) is not None:
                self._unsure.discard(key)
                return finalised  # its preview's message
        sent_any = False
        ts = None
        try:
            if self._as_file(action):
                if not posted:
                    sent_any = True  # an upload that failed late may be shared all the same
                    await self._upload(clients, action, key)
                self._unsure.discard(key)
                return None
            plans = action.ref.workspace not in self._plain_plans
            for part, call in enumerate(render(action, idempotency_key=key, plans=plans)):
                if part in posted:
                    ts = posted[part]
                    continue
                answer = cast(PostMessageAnswer, await self._call(clients, call))
                sent_any = True
                ts = str(answer.get("ts") or "") or ts
        except SlackApiError as exc:
            if sent_any or posted or answer_of(exc)[0] >= 500:
                self._unsure.add(key)
            raise
        except UNREACHABLE:
            self._unsure.add(key)
            raise
        self._unsure.discard(key)
        if ts:
            await self._seed_reactions(clients, action, ts)
        return ts

    async def _set_status(self, clients: WebClients, action: SetSessionStatus) -> None:
        """Mark the thread's agent session (:mod:`adapters.slack.sessions`); never fails
        the row but for a 429 (waited out like any other).

        A refusal (Slack's error code) turns sessions off in the workspace, said once; a
        call Slack did not answer is logged and left: the conversation's next status
        says where it stands, and a status is no message to report as undelivered.
        """
        workspace = action.ref.workspace
        if not self.sessions.allowed(workspace):
            return
        call = session_call(action)
        try:
            response = await clients.edit_client.agents_sessions_setStatus(**call.args)
        except SlackApiError as exc:
            status, code = answer_of(exc)
            if status == 429:
                raise
            if code is None:
                log.warning("agents.sessions.setStatus got no answer (HTTP %s)", status)
                return
            self.sessions.refused(workspace, code)
            return
        except UNREACHABLE as exc:
            log.warning("agents.sessions.setStatus: Slack could not be reached: %r", exc)
            return
        data = response.data
        self.sessions.answered(workspace, data if isinstance(data, dict) else {})

    def _as_file(self, action: PostReply) -> bool:
        """Whether ``action`` goes up as a file: a long reply that asks for nothing.

        A message with buttons or seeded reactions (a plan, a tool approval) is
        posted as messages whatever its length: a file would drop its buttons, and
        a reaction could not find it. The feedback buttons under an answer do not
        count: a long answer goes up as a file without them.
        """
        plain = feedback_only(action.buttons) and not (action.reactions or action.ephemeral_to)
        return plain and len(action.text) > self._file_threshold

    async def _seed_reactions(self, clients: WebClients, action: PostReply, ts: str) -> None:
        """Add the bot's reactions to its new message ``ts``; a failure is only logged.

        The message is posted: raising here would post it again on the retry, and
        people can react (or press the buttons) without the seeds.
        """
        for call in seed_reactions(action, action.ref.channel, ts):
            try:
                await self._call(clients, call, ignore=("already_reacted",))
            except UNREACHABLE as exc:  # SlackApiError included
                log.warning("could not add :%s: to %s: %s", call.args.get("name"), ts, exc)

    async def _upload(self, clients: WebClients, action: PostReply, key: str) -> None:
        """Upload the text as a file in the thread, named after ``key`` to find it again."""
        await clients.post_client.files_upload_v2(
            channel=action.ref.channel,
            thread_ts=action.ref.thread,
            content=action.text,
            filename=answer_file_name(key),
            title="threadbot answer",
            initial_comment=escape(file_summary(action.text)),
        )

    async def _already_posted(
        self, clients: WebClients, action: PostReply, key: str
    ) -> dict[int, str]:
        """``{part: ts}`` of the parts of ``key`` already in the thread (a file: part 0).

        Parts are found by ``metadata.event_payload`` (``key`` and ``part``), a file
        by its name. When Slack refuses to tell (say the thread is gone), nothing is
        found: a message posted twice is better than one never posted. When it does
        not answer (a server error, after the look-up client's own retry; no answer
        at all), the ``SlackApiError`` or connection error is raised: the post waits
        for the deliverer's next attempt, which looks again, rather than go twice.
        """
        if action.ref.thread is None:
            return {}
        try:
            response = await clients.client.conversations_replies(
                channel=action.ref.channel,
                ts=action.ref.thread,
                include_all_metadata=True,
                limit=_REPLIES_LIMIT,
            )
        except SlackApiError as exc:
            status, code = answer_of(exc)
            if code is None or status >= 500:
                raise  # no answer from Slack: look again at the next attempt
            log.warning("could not look for %s in thread %s: %s", key, action.ref.thread, code)
            return {}
        replies = cast(ConversationsReplies, response.data)
        found: dict[int, str] = {}
        for message in replies.get("messages") or []:
            payload = mapping(mapping(message.get("metadata")).get("event_payload"))
            names = (text(f.get("name")) for f in mappings(message.get("files")))
            if payload.get("key") == key:
                found[_part(payload.get("part"))] = str(message["ts"])
            elif answer_file_name(key) in names:
                found[0] = str(message["ts"])
        return found

    async def _call(
        self, clients: WebClients, call: ApiCall, ignore: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """Make one change (a post through ``post_client``, else ``edit_client``).

        Errors named in ``ignore`` answer ``{}``; others raise ``SlackApiError``.
        """
        posting = call.method in ("chat.postMessage", "chat.postEphemeral")
        client = clients.post_client if posting else clients.edit_client
        try:
            response = await client.api_call(call.method, json=call.args)
        except SlackApiError as exc:
            if answer_of(exc)[1] in ignore:
                return {}
            raise
        return dict(response.data) if isinstance(response.data, dict) else {}


def _part(value: object) -> int:
    """The part number in a message's metadata; 0 when it is not a whole number."""
    digits = str(value)
    return int(digits) if digits.isdigit() else 0
