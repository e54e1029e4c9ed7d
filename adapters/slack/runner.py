"""The Slack runner: a slack-bolt ``AsyncApp`` wired to the hub, and the Slack sender.

Inbound: bolt receives events, slash commands and button clicks, over Socket Mode
(``SLACK_APP_TOKEN`` set; no public URL needed) or HTTP (``POST /slack/events`` on
an aiohttp server, signatures checked with the signing secret by bolt). Every
listener acknowledges first (Slack wants the ack within 3 s:
https://docs.slack.dev/apis/events-api/#responding), then hands the translated
event to the hub, which only records and queues it. Duplicates and Slack's
retries (``X-Slack-Retry-Num``, ``retry_attempt``) are dropped by the hub's
delivery keys, in the store, across restarts.

Outbound: :meth:`SlackAdapter.send` renders a neutral action into Web API calls
(:mod:`adapters.slack.outbound`). Posts go through slack-sdk's rate-limit retry
handler; ``chat.update`` does not wait: a 429 becomes
:class:`conversations.errors.RateLimited` and the deliverer merges the edit into
the next one. A message that may have been posted before a crash is looked up
by its outbox key in the thread's ``metadata`` before it is posted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.outbound import ApiCall, render, seed_reactions
from adapters.slack.translate import BotIdentity, action_event, command_event, inbound_event
from conversations.adapter import InboundSink
from conversations.errors import DeliveryError, RateLimited
from conversations.events import AddReaction, InboundEvent, OutboundAction, PostReply, UpdateMessage

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


@dataclass(frozen=True, kw_only=True)
class SlackConfig:
    """How to reach Slack.

    ``api_url`` overrides the Web API base (GovSlack, proxies, tests; it must end
    with ``/``). ``app_token`` selects Socket Mode; otherwise HTTP on ``host:port``
    with ``signing_secret``. ``file_threshold``: characters past which a message is
    uploaded as a file instead. ``bot_thread_cap``: other bots' messages taken per
    thread when ``allow_bots`` (stops bot-to-bot loops).
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
        # chat.update goes without the retry handler: a 429 is merged, not waited for
        self._edits = AsyncWebClient(token=config.bot_token, base_url=base_url)
        self.app = AsyncApp(
            client=self.client,
            signing_secret=config.signing_secret or "socket-mode-needs-no-secret",
            request_verification_enabled=config.app_token is None,
        )
        self.me: BotIdentity | None = None
        self._hub: InboundSink | None = None
        self._bot_messages: Counter[tuple[str, str]] = Counter()
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._register()

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, hub: InboundSink) -> None:
        """Learn who the bot is (``auth.test``), then start receiving."""
        self._hub = hub
        self.me = await self._identity()
        if self._config.app_token:
            self._socket = AsyncSocketModeHandler(self.app, self._config.app_token)
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

    async def close(self) -> None:
        """Stop receiving and close the HTTP sessions."""
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
        if self._runner is not None:
            await self._runner.cleanup()

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
        response = await self.app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

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
        if self._hub is None:
            return
        try:
            await self._hub.handle(event)
        except Exception:
            log.exception("the hub could not take %s", event.delivery_key)

    def _within_bot_cap(self, event: InboundEvent) -> bool:
        if not event.author.is_bot:
            return True
        key = (event.ref.channel, event.ref.thread or event.ref.message or "")
        self._bot_messages[key] += 1
        return self._bot_messages[key] <= self._config.bot_thread_cap

    # --- outbound ------------------------------------------------------------------

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action``; the ts of the (last) new message for a post, else None.

        Raises :class:`RateLimited` for a ``chat.update`` refused with 429, and
        :class:`DeliveryError` (``permanent`` for errors that a retry cannot fix)
        when Slack refused.
        """
        try:
            if isinstance(action, PostReply):
                return await self._post(action, idempotency_key, maybe_sent)
            client = self._edits if isinstance(action, UpdateMessage) else self.client
            for call in render(action, idempotency_key=idempotency_key):
                await self._call(client, call, ignore=("already_reacted",))
            return None
        except SlackApiError as exc:
            raise _delivery_error(exc, action) from exc

    async def _post(self, action: PostReply, key: str, maybe_sent: bool) -> str | None:
        if maybe_sent and (found := await self._already_posted(action, key)) is not None:
            return found
        if len(action.text) > self._config.file_threshold and not action.ephemeral_to:
            return await self._upload(action)
        ts: str | None = None
        for call in render(action, idempotency_key=key):
            response = await self._call(self.client, call)
            ts = str(response.get("ts") or response.get("message_ts") or "") or ts
        if ts and not action.ephemeral_to:
            for call in seed_reactions(action, action.ref.channel, ts):
                await self._call(self.client, call, ignore=("already_reacted",))
        return ts

    async def _upload(self, action: PostReply) -> str | None:
        first_line = action.text.strip().splitlines()[0][:200] if action.text.strip() else ""
        await self.client.files_upload_v2(
            channel=action.ref.channel,
            thread_ts=action.ref.thread,
            content=action.text,
            filename="threadbot-answer.md",
            title="threadbot answer",
            initial_comment=f"{first_line}\n(the whole answer is in the attached file)",
        )
        return None

    async def _already_posted(self, action: PostReply, key: str) -> str | None:
        """The ts of a message already carrying ``key`` in its metadata, if any."""
        if action.ref.thread is None or action.ephemeral_to:
            return None
        replies = await self.client.conversations_replies(
            channel=action.ref.channel, ts=action.ref.thread, include_all_metadata=True, limit=200
        )
        found = [
            str(m["ts"])
            for m in replies.get("messages") or []
            if ((m.get("metadata") or {}).get("event_payload") or {}).get("key") == key
        ]
        return found[-1] if found else None

    async def _call(
        self, client: AsyncWebClient, call: ApiCall, ignore: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        try:
            response = await client.api_call(call.method, json=call.args)
        except SlackApiError as exc:
            if exc.response.get("error") in ignore:
                return {}
            raise
        return dict(response.data) if isinstance(response.data, dict) else {}


def _delivery_error(exc: SlackApiError, action: OutboundAction) -> DeliveryError:
    status = exc.response.status_code
    error = str(exc.response.get("error") or exc)
    if status == 429:
        retry_after = float(exc.response.headers.get("Retry-After", 1) or 1)
        return RateLimited(f"Slack rate-limited {action.kind}: {error}", retry_after=retry_after)
    permanent = error in PERMANENT_ERRORS or isinstance(action, AddReaction)
    return DeliveryError(f"Slack refused {action.kind}: {error}", permanent=permanent)


async def wait_forever() -> None:
    """Sleep until cancelled (the runner's lifetime when no console reads input)."""
    await asyncio.Event().wait()
