"""The Slack runner: a slack-bolt ``AsyncApp`` wired to the hub, and the Slack sender.

Inbound: bolt receives events, slash commands and button clicks, over Socket Mode
(``SLACK_APP_TOKEN`` set; no public URL needed) or HTTP (``POST /slack/events`` on
an aiohttp server, signatures checked with the signing secret by bolt). Every
listener acknowledges first (Slack wants the ack within 3 s:
https://docs.slack.dev/apis/events-api/#responding), then hands the translated
event to the hub, which only records and queues it. Duplicates and Slack's
retries (``X-Slack-Retry-Num``, ``retry_attempt``) are dropped by the hub's
delivery keys, in the store, across restarts. A malformed delivery never reaches
bolt (:mod:`adapters.slack.envelopes`): over HTTP it gets 400 and a log line, over
Socket Mode it is logged, acked and skipped (:mod:`adapters.slack.socket_mode`).

Outbound: :meth:`SlackAdapter.send` renders a neutral action into Web API calls
(:mod:`adapters.slack.outbound`). No call it makes to change something (post,
update, reaction, file upload) goes through slack-sdk's rate-limit retry handler:
a 429 becomes :class:`conversations.errors.RateLimited` with the ``Retry-After``
seconds at once (https://docs.slack.dev/apis/web-api/rate-limits). The deliverer
owns those waits, per conversation: a conversation waiting out a rate limit gives
its worker slot to others, the wait is visible and interruptible (a shutdown),
and status edits refused meanwhile are merged into one later edit. Sleeping
inside ``send`` instead (``AsyncRateLimitErrorRetryHandler``) would hide the
wait, hold a worker, and give up after its retries as if it were a failure.
Edits and reactions (:attr:`SlackAdapter.edit_client`) keep slack-sdk's default
retry of a dropped connection: doing them twice changes nothing. Posts and
uploads (:attr:`SlackAdapter.post_client`) have no retry at all: a connection
reset after Slack took a post would post it twice, so a lost answer is left to
the look-up below and the deliverer's retry. Bolt and the look-ups
(``auth.test``, ``conversations.replies``) keep the rate-limit handler on
:attr:`SlackAdapter.client`.

A message that may have been posted already (before a crash, or by an attempt
that failed part-way or lost Slack's answer) is looked up by its outbox key in
the thread's ``metadata`` (a file by its name), and only its missing parts are
posted. A dropped connection or a timeout is a transient :class:`DeliveryError`;
the bot's reactions are seeded after the post, and a failure to seed one is
logged, never a reason to post the message again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from adapters.common import BotCap, hand_over
from adapters.slack.envelopes import Malformed, read_http_body
from adapters.slack.outbound import ApiCall, escape, render, seed_reactions
from adapters.slack.socket_mode import GuardedSocketModeHandler
from adapters.slack.translate import BotIdentity, action_event, command_event, inbound_event
from conversations.adapter import InboundSink
from conversations.errors import DeliveryError, RateLimited
from conversations.events import AddReaction, InboundEvent, OutboundAction, PostReply

log = logging.getLogger(__name__)

PERMANENT_ERRORS = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_auth",
        "account_inactive",
        "msg_too_long",
        "no_text",
        "message_not_found",
        "cant_update_message",
        "missing_scope",
        "invalid_blocks",
    }
)


_UNREACHABLE: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, SlackClientError)
"""What slack-sdk raises when Slack did not answer (``SlackApiError`` is caught before)."""


@dataclass(frozen=True, kw_only=True)
class SlackConfig:
    """How to reach Slack.

    ``api_url`` overrides the Web API base (GovSlack, proxies, tests; it must end
    with ``/``). ``app_token`` selects Socket Mode; otherwise HTTP on ``host:port``
    with ``signing_secret``. ``file_threshold``: characters past which a reply with
    no buttons or reactions (an answer) is uploaded as a file instead.
    ``bot_thread_cap``: other bots' messages taken per thread when ``allow_bots``
    (stops bot-to-bot loops).
    """

    bot_token: str
    app_token: str | None = None
    signing_secret: str | None = None
    api_url: str | None = None
    host: str = "0.0.0.0"
    port: int = 3000
    path: str = "/slack/events"
    stop_command: str = "stop"
    allow_bots: bool = False
    bot_thread_cap: int = 5
    file_threshold: int = 12_000


class SlackAdapter:
    """Slack through slack-bolt and slack-sdk; a :class:`conversations.adapter.Sender`."""

    platform = "slack"

    def __init__(self, config: SlackConfig) -> None:
        self._config = config
        base_url = config.api_url or AsyncWebClient.BASE_URL
        self.client = AsyncWebClient(
            token=config.bot_token,
            base_url=base_url,
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)],
        )
        """Bolt's client and the look-ups': waits out a 429 itself (up to three times)."""
        self.edit_client = AsyncWebClient(token=config.bot_token, base_url=base_url)
        """:meth:`send`'s edits and reactions: a 429 is raised; a dropped connection retried."""
        self.post_client = AsyncWebClient(
            token=config.bot_token, base_url=base_url, retry_handlers=[]
        )
        """:meth:`send`'s posts and uploads: nothing retried inside (a post is not idempotent)."""
        self.app = AsyncApp(
            client=self.client,
            signing_secret=config.signing_secret or "socket-mode-needs-no-secret",
            request_verification_enabled=config.app_token is None,
        )
        self.me: BotIdentity | None = None
        self._hub: InboundSink | None = None
        self._bots = BotCap(config.bot_thread_cap)
        self._socket: AsyncSocketModeHandler | None = None
        self._unsure: set[str] = set()
        """Keys of posts that failed after a part went out, or with no answer: looked up
        before they are posted again."""
        self._runner: web.AppRunner | None = None
        self._receiving = True
        self._register()

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, hub: InboundSink) -> None:
        """Learn who the bot is (``auth.test``), then start receiving."""
        self._hub = hub
        self.me = await self._identity()
        if self._config.app_token:
            self._socket = GuardedSocketModeHandler(self.app, self._config.app_token)
            await self._socket.connect_async()  # type: ignore[no-untyped-call]
            return
        server = web.Application()
        server.router.add_post(self._config.path, self._http)
        self._runner = web.AppRunner(server)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._config.host, self._config.port).start()

    @property
    def port(self) -> int | None:
        """The HTTP port actually bound (useful with ``port=0``), in HTTP mode."""
        if self._runner is None:
            return None
        for site in self._runner.sites:
            server = getattr(site, "_server", None)
            if server is not None and server.sockets:
                return int(server.sockets[0].getsockname()[1])
        return None

    async def stop_receiving(self) -> None:
        """Take no more events (a shutdown): Slack retries them, or sends them elsewhere.

        Socket Mode: the connection is closed, so Slack delivers to another
        connection of the app. HTTP: the server stops listening, and Slack retries
        an event it got no answer for (https://docs.slack.dev/apis/events-api/#retries).
        Sending goes on.
        """
        self._receiving = False
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def keep_connected(self, *, check_every: float = 20.0, patience: int = 3) -> None:
        """Watch the Socket Mode connection; raise when it stays down (the app restarts this).

        slack-sdk reconnects a dropped or stale session itself; this watchdog
        covers the case where that keeps failing: after ``patience`` checks
        ``check_every`` seconds apart that find no live session, it raises
        ``ConnectionError``, and the supervised restart connects afresh. In HTTP
        mode there is no connection to keep, and it returns at once.
        """
        if self._config.app_token is None:
            return
        if self._socket is None and self._receiving:
            self._socket = GuardedSocketModeHandler(self.app, self._config.app_token)
            await self._socket.connect_async()  # type: ignore[no-untyped-call]
        down = 0
        while self._socket is not None:
            await asyncio.sleep(check_every)
            if self._socket is None or await self._socket.client.is_connected():
                down = 0
                continue
            down += 1
            if down >= patience:
                socket, self._socket = self._socket, None
                with contextlib.suppress(Exception):
                    await socket.close_async()  # type: ignore[no-untyped-call]
                raise ConnectionError(
                    f"the Slack Socket Mode connection has been down for "
                    f"{check_every * patience:g} s"
                )

    async def close(self) -> None:
        """Stop receiving and close the HTTP sessions."""
        await self.stop_receiving()

    async def _identity(self) -> BotIdentity:
        auth = await self.client.auth_test()
        bot_id = str(auth.get("bot_id") or "")
        app_id = ""
        if bot_id:
            with contextlib.suppress(SlackApiError):
                info = await self.client.bots_info(bot=bot_id)
                app_id = str((info.get("bot") or {}).get("app_id") or "")
        return BotIdentity(
            user_id=str(auth["user_id"]),
            bot_id=bot_id,
            app_id=app_id,
            team_id=str(auth.get("team_id") or ""),
        )

    async def _http(self, request: web.Request) -> web.Response:
        """One HTTP request from Slack, through bolt; a malformed body gets 400, not 500.

        The body is checked before bolt sees it (:func:`read_http_body`: bolt
        raises or answers 500 on bodies of the wrong shape), so the check comes
        before bolt's signature check too: malformed bodies, signed or not, get
        400 and a log line; a well-formed one with a bad signature gets bolt's 401.
        """
        raw = await request.read()
        body = read_http_body(raw, request.content_type)
        if isinstance(body, Malformed):
            return _refused(body, request, len(raw))
        try:
            bolt_request = AsyncBoltRequest(
                body=body,
                query=request.query_string,
                headers=request.headers,  # type: ignore[arg-type]  # a mapping bolt copies
            )
        except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
            return _refused(Malformed(f"bolt could not read it: {exc!r}"), request, len(raw))
        return await to_aiohttp_response(await self.app.async_dispatch(bolt_request))

    # --- inbound -------------------------------------------------------------------

    def _register(self) -> None:
        for name in ("app_mention", "message", "reaction_added", "reaction_removed"):
            self.app.event(name)(self._on_event)
        self.app.command(re.compile(r"^/.+"))(self._on_command)
        self.app.action(re.compile(r".*"))(self._on_action)

    async def _on_event(self, body: dict[str, Any]) -> None:
        if self.me is None:
            return
        event = inbound_event(body, self.me, allow_bots=self._config.allow_bots)
        if event is not None and self._within_bot_cap(event):
            await self._deliver(event)

    async def _on_command(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        if self.me is not None and (event := command_event(body, self.me)) is not None:
            await self._deliver(event)

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        if self.me is not None and (event := action_event(body, self.me)) is not None:
            await self._deliver(event)

    async def _deliver(self, event: InboundEvent) -> None:
        await hand_over(self._hub, event)

    def _within_bot_cap(self, event: InboundEvent) -> bool:
        return self._bots.allows(event, (event.ref.channel, event.ref.thread or event.ref.message))

    # --- outbound ------------------------------------------------------------------

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action``; the ts of the (last) new message for a post, else None.

        Raises :class:`RateLimited` (with ``Retry-After``) for any call refused with
        429, at once, and :class:`DeliveryError` (``permanent`` for errors that a
        retry cannot fix) when Slack refused or could not be reached (a dropped
        connection, a timeout: transient).
        """
        try:
            if isinstance(action, PostReply):
                return await self._post(action, idempotency_key, maybe_sent)
            for call in render(action, idempotency_key=idempotency_key):
                await self._call(call, ignore=("already_reacted",))
            return None
        except SlackApiError as exc:
            raise _delivery_error(exc, action) from exc
        except _UNREACHABLE as exc:
            raise DeliveryError(f"Slack could not be reached for {action.kind}: {exc!r}") from exc

    async def _post(self, action: PostReply, key: str, maybe_sent: bool) -> str | None:
        """Post ``action`` (its parts, or a file), each part once, then seed its reactions.

        A post that failed after a part went out, or whose fate is unknown (no
        answer, a 5xx), is looked up like a ``maybe_sent`` one when it is tried
        again, so no part is posted twice and none is left out.
        """
        if action.ephemeral_to:  # nothing to find it by later, and no reactions
            ts: str | None = None
            for call in render(action, idempotency_key=key):
                response = await self._call(call)
                ts = str(response.get("message_ts") or response.get("ts") or "") or ts
            return ts
        posted: dict[int, str] = {}
        if maybe_sent or key in self._unsure:
            posted = await self._already_posted(action, key)
        sent_any = False
        ts = None
        try:
            if self._as_file(action):
                if not posted:
                    sent_any = True  # an upload that failed late may be shared all the same
                    await self._upload(action, key)
                self._unsure.discard(key)
                return None
            for part, call in enumerate(render(action, idempotency_key=key)):
                if part in posted:
                    ts = posted[part]
                    continue
                response = await self._call(call)
                sent_any = True
                ts = str(response.get("ts") or "") or ts
        except SlackApiError as exc:
            if sent_any or posted or exc.response.status_code >= 500:
                self._unsure.add(key)
            raise
        except _UNREACHABLE:
            self._unsure.add(key)
            raise
        self._unsure.discard(key)
        if ts:
            await self._seed_reactions(action, ts)
        return ts

    def _as_file(self, action: PostReply) -> bool:
        """Whether ``action`` goes up as a file: a long reply that asks for nothing.

        A message with buttons or seeded reactions (a plan, a tool approval) is
        posted as messages whatever its length: a file would drop its buttons, and
        a reaction could not find it.
        """
        plain = not (action.buttons or action.reactions or action.ephemeral_to)
        return plain and len(action.text) > self._config.file_threshold

    async def _seed_reactions(self, action: PostReply, ts: str) -> None:
        """Add the bot's reactions to its new message ``ts``; a failure is only logged.

        The message is posted: raising here would post it again on the retry, and
        people can react (or press the buttons) without the seeds.
        """
        for call in seed_reactions(action, action.ref.channel, ts):
            try:
                await self._call(call, ignore=("already_reacted",))
            except _UNREACHABLE as exc:  # SlackApiError included
                log.warning("could not add :%s: to %s: %s", call.args.get("name"), ts, exc)

    async def _upload(self, action: PostReply, key: str) -> None:
        """Upload the text as a file in the thread, named after ``key`` to find it again."""
        first_line = action.text.strip().splitlines()[0][:200] if action.text.strip() else ""
        await self.post_client.files_upload_v2(
            channel=action.ref.channel,
            thread_ts=action.ref.thread,
            content=action.text,
            filename=_answer_file(key),
            title="threadbot answer",
            initial_comment=escape(f"{first_line}\n(the whole answer is in the attached file)"),
        )

    async def _already_posted(self, action: PostReply, key: str) -> dict[int, str]:
        """``{part: ts}`` of the parts of ``key`` already in the thread (a file: part 0).

        Parts are found by ``metadata.event_payload`` (``key`` and ``part``), a file
        by its name. When Slack will not tell (say the thread is gone), nothing is
        found: a message posted twice is better than one never posted.
        """
        if action.ref.thread is None:
            return {}
        try:
            replies = await self.client.conversations_replies(
                channel=action.ref.channel,
                ts=action.ref.thread,
                include_all_metadata=True,
                limit=200,
            )
        except SlackApiError as exc:
            log.warning("could not look for %s in thread %s: %s", key, action.ref.thread, exc)
            return {}
        found: dict[int, str] = {}
        for message in replies.get("messages") or []:
            payload = (message.get("metadata") or {}).get("event_payload") or {}
            files = message.get("files") or []
            if payload.get("key") == key:
                part = payload.get("part", 0)
                found[int(part) if str(part).isdigit() else 0] = str(message["ts"])
            elif any(f.get("name") == _answer_file(key) for f in files if isinstance(f, dict)):
                found[0] = str(message["ts"])
        return found

    async def _call(self, call: ApiCall, ignore: tuple[str, ...] = ()) -> dict[str, Any]:
        """Make one change (a post through :attr:`post_client`, else :attr:`edit_client`).

        Errors named in ``ignore`` answer ``{}``; others raise ``SlackApiError``.
        """
        posting = call.method in ("chat.postMessage", "chat.postEphemeral")
        client = self.post_client if posting else self.edit_client
        try:
            response = await client.api_call(call.method, json=call.args)
        except SlackApiError as exc:
            if exc.response.get("error") in ignore:
                return {}
            raise
        return dict(response.data) if isinstance(response.data, dict) else {}


def _refused(malformed: Malformed, request: web.Request, size: int) -> web.Response:
    """Answer 400 to a malformed request body, with one log line (no traceback)."""
    log.warning(
        "Slack HTTP: refused a malformed %s body of %d bytes with 400: %s",
        request.content_type,
        size,
        malformed.reason,
    )
    return web.Response(status=400, text=f"malformed request: {malformed.reason}\n")


def _answer_file(key: str) -> str:
    """The name of the file a long answer goes up as: unique per outbox row."""
    return f"threadbot-answer-{key}.md"


def _retry_after(exc: SlackApiError) -> float:
    """Seconds from the ``Retry-After`` header (whole seconds at Slack), 1 if unreadable."""
    try:
        return max(float(exc.response.headers.get("Retry-After") or 1), 0.0)
    except (TypeError, ValueError):
        return 1.0


def _delivery_error(exc: SlackApiError, action: OutboundAction) -> DeliveryError:
    status = exc.response.status_code
    error = str(exc.response.get("error") or exc)
    if status == 429:
        retry_after = _retry_after(exc)
        return RateLimited(f"Slack rate-limited {action.kind}: {error}", retry_after=retry_after)
    permanent = error in PERMANENT_ERRORS or isinstance(action, AddReaction)
    return DeliveryError(f"Slack refused {action.kind}: {error}", permanent=permanent)


async def wait_forever() -> None:
    """Sleep until cancelled (the runner's lifetime when no console reads input)."""
    await asyncio.Event().wait()
