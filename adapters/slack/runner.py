"""The Slack runner: a slack-bolt ``AsyncApp`` wired to the hub, and the Slack sender.

Inbound: bolt receives events, slash commands and button clicks, over Socket Mode
(``SLACK_APP_TOKEN`` set; no public URL needed) or HTTP (``POST /slack/events`` on
an aiohttp server, signatures checked with the signing secret by bolt). Every
listener acknowledges first (Slack wants the ack within 3 s:
https://docs.slack.dev/apis/events-api/#responding), then hands the translated
event (:mod:`adapters.slack.translate`) to the hub, which only records and queues
it. Duplicates and Slack's retries (``X-Slack-Retry-Num``, ``retry_attempt``) are
dropped by the hub's delivery keys, in the store, across restarts. A malformed
delivery never reaches bolt (:mod:`adapters.slack.envelopes`): over HTTP it gets
400 and a log line, over Socket Mode it is logged, acked and skipped
(:mod:`adapters.slack.socket_mode`). A well-formed one no listener takes (a
shortcut, a modal's submit, ``app_rate_limited``) gets 200, or its envelope is
acked, and is dropped (:mod:`adapters.slack.unhandled`).

Outbound: :meth:`SlackAdapter.send` is :mod:`adapters.slack.sending`'s, over the
three Web API clients of :mod:`adapters.slack.web` (bolt's and the look-ups'
:attr:`SlackAdapter.client`, :attr:`SlackAdapter.edit_client` and
:attr:`SlackAdapter.post_client`), or, with installs, over each workspace's own
(:attr:`SlackAdapter.teams`, :mod:`adapters.slack.teams`).

Installs (``oauth`` in the config): the app is installed in many workspaces through
Slack's OAuth flow (:mod:`adapters.slack.oauth`), each install kept in the database
(:mod:`adapters.slack.installations`); bolt then authorizes each event with its
workspace's bot, and the listeners read who the bot is there from bolt's context. The
token of ``SLACK_BOT_TOKEN``, when set too, still serves its own workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError

from adapters.fields import mapping, text
from adapters.http_log import ServerLog
from adapters.inbound import BotCap, hand_over
from adapters.slack.bolt_app import bolt_app, dispatch_http, me_in
from adapters.slack.errors import SlackStartError, SocketModeDown
from adapters.slack.files import SlackFiles
from adapters.slack.installations import SlackInstallationStore, fallback_bot
from adapters.slack.oauth import INSTALL_PATH, REDIRECT_PATH, OAuthConfig, serve_oauth
from adapters.slack.sending import SlackSender
from adapters.slack.sessions import session_stopped
from adapters.slack.socket_mode import GuardedSocketModeHandler
from adapters.slack.teams import TeamClients
from adapters.slack.translate import BotIdentity, action_event, command_event, inbound_event
from adapters.slack.types import AuthTest, BlockActions, BotsInfo, EventCallback, SlashCommand
from adapters.slack.unhandled import UnhandledRequests
from adapters.slack.web import UNREACHABLE, RateLimitSeen, WebClients
from conversations.adapter import InboundSink
from conversations.events import InboundEvent, OutboundAction, PlatformRef
from conversations.installs import Installs
from conversations.texts import PlatformTexts

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SlackConfig:
    """How to reach Slack.

    ``api_url`` overrides the Web API base (GovSlack, proxies, tests; it must end
    with ``/``). ``app_token`` selects Socket Mode; otherwise HTTP on ``host:port``
    with ``signing_secret``. ``file_threshold``: characters past which a reply with
    no buttons or reactions (an answer) is uploaded as a file instead.
    ``bot_thread_cap``: other bots' messages taken per thread when ``allow_bots``
    (stops bot-to-bot loops). ``oauth``: the app's OAuth credentials, when it is installed
    in workspaces through Slack's flow (then ``bot_token`` may be None).
    """

    bot_token: str | None
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
    oauth: OAuthConfig | None = None


class SlackAdapter:
    """Slack through slack-bolt and slack-sdk; a :class:`conversations.adapter.Sender`."""

    platform = "slack"
    texts = PlatformTexts(platform="slack")
    """What the hub says on Slack: the defaults (``bot`` hands it to the hub)."""

    def __init__(self, config: SlackConfig) -> None:
        self._config = config
        self.rate_limited: RateLimitSeen = lambda _method: None
        """Told the Web API method of every 429 Slack answers (the bot counts them)."""
        clients = WebClients.for_token(
            config.bot_token, base_url=config.api_url, rate_limited=self._seen_429
        )
        self.installations = SlackInstallationStore() if config.oauth is not None else None
        """Bolt's installation store, with installs (:meth:`use_installs`); else None."""
        token_of = None if self.installations is None else self.installations.bot_token
        self.teams = TeamClients(
            clients, token_of=token_of, base_url=config.api_url, rate_limited=self._seen_429
        )
        """Each workspace's clients (one token's for every workspace without installs)."""
        self.client = clients.client
        """Bolt's client and the look-ups': waits out a 429 itself (up to three times)."""
        self.edit_client = clients.edit_client
        """:meth:`send`'s edits and reactions: a 429 is raised; a dropped connection retried."""
        self.post_client = clients.post_client
        """:meth:`send`'s posts and uploads: nothing retried inside (a post is not idempotent)."""
        self._sender = SlackSender(clients=self.teams, file_threshold=config.file_threshold)
        self.files = SlackFiles(token=config.bot_token, api_url=config.api_url, token_of=token_of)
        """Fetches the files people share (``bot`` hands it to the hub)."""
        self.app = bolt_app(
            config.signing_secret,
            client=self.client,
            socket_mode=config.app_token is not None,
            oauth=config.oauth,
            installations=self.installations,
            api_url=config.api_url,
        )
        self._unhandled = UnhandledRequests()
        self.me: BotIdentity | None = None
        self._hub: InboundSink | None = None
        self._bots = BotCap(config.bot_thread_cap)
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._receiving = True
        self._register()

    def _seen_429(self, method: str) -> None:
        self.rate_limited(method)

    def use_installs(self, installs: Installs) -> None:
        """Keep the app's installs in ``installs`` (before :meth:`start`; with ``oauth``)."""
        if self.installations is None:
            return
        self.installations.installs = installs
        installs.changed = lambda installation: self.teams.forget(installation.team)

    @property
    def oauth_routes(self) -> dict[str, Any]:
        """The install and redirect paths and their handler, for the operations address
        in Socket Mode (HTTP mode serves them beside ``/slack/events``); empty without
        installs or in HTTP mode."""
        if self._config.oauth is None or self._config.app_token is None:
            return {}
        return {INSTALL_PATH: self.serve_oauth, REDIRECT_PATH: self.serve_oauth}

    async def serve_oauth(self, request: web.Request) -> web.Response:
        """A browser's request on the install or redirect path (:mod:`adapters.slack.oauth`)."""
        flow = self.app.oauth_flow
        if flow is None:
            return web.Response(status=404, text="this bot is not installed through OAuth\n")
        return await serve_oauth(flow, request)

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, hub: InboundSink) -> None:
        """Learn who the bot is (``auth.test``), then start receiving.

        Raises slack-sdk's ``SlackApiError`` when Slack refuses the token, and
        :class:`SlackStartError` when ``auth.test`` names no bot user or the installs
        were not given. With installs, every live install is read (and its token
        learned) first; without ``SLACK_BOT_TOKEN`` the bot is known per workspace only,
        from each event's install.
        """
        self._hub = hub
        if self.installations is not None:
            if self.installations.installs is None:
                raise SlackStartError("OAuth is configured but the installs were not given")
            await self.installations.installs.refresh()
        if self._config.bot_token is None:
            self.me = BotIdentity(user_id="", bot_id="", app_id="", team_id="")
        else:
            self.me = await self._identity()
            if self.installations is not None:
                self.installations.fallback = fallback_bot(self.me, self._config.bot_token)
        if self._config.app_token:
            self._socket = GuardedSocketModeHandler(self.app, self._config.app_token)
            await self._socket.connect_async()  # type: ignore[no-untyped-call]
            return
        server = web.Application()
        server.router.add_post(self._config.path, self._http)
        if self._config.oauth is not None:
            server.router.add_get(INSTALL_PATH, self.serve_oauth)
            server.router.add_get(REDIRECT_PATH, self.serve_oauth)
        self._runner = web.AppRunner(server, logger=ServerLog(logging.getLogger(__name__)))
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

    @property
    def address(self) -> str | None:
        """Where HTTP mode takes Slack's requests (``http://host:port/slack/events``);
        None in Socket Mode or before :meth:`start`."""
        port = self.port
        if port is None:
            return None
        return f"http://{self._config.host}:{port}{self._config.path}"

    async def connected(self) -> bool:
        """Whether Slack can reach the bot now: the bot's identity is known and, in
        Socket Mode, the WebSocket session is open (slack-sdk reconnects a dropped one
        by itself); in HTTP mode, the server listens. For ``/readyz``."""
        if self.me is None or not self._receiving:
            return False
        if self._config.app_token is not None:
            socket = self._socket
            return socket is not None and bool(await socket.client.is_connected())
        return self._runner is not None

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
        :class:`SocketModeDown` (a ``ConnectionError``), and the supervised restart
        connects afresh. In HTTP mode there is no connection to keep, and it
        returns at once.
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
                raise SocketModeDown(
                    f"the Slack Socket Mode connection has been down for "
                    f"{check_every * patience:g} s"
                )

    async def close(self) -> None:
        """Stop receiving and close the HTTP sessions."""
        await self.stop_receiving()

    async def _identity(self) -> BotIdentity:
        """Who the bot is: ``auth.test``, and ``bots.info`` for its app id.

        Raises :class:`SlackStartError` when ``auth.test`` names no user; a
        ``bots.info`` that fails leaves the app id empty.
        """
        me = BotIdentity.from_auth_test(cast(AuthTest, (await self.client.auth_test()).data))
        if not me.user_id:
            raise SlackStartError("auth.test named no bot user (user_id)")
        if not me.bot_id:
            return me
        with contextlib.suppress(SlackApiError):
            info = cast(BotsInfo, (await self.client.bots_info(bot=me.bot_id)).data)
            me = dataclasses.replace(me, app_id=text(mapping(info.get("bot")).get("app_id")) or "")
        return me

    async def _http(self, request: web.Request) -> web.Response:
        """One HTTP request from Slack, through bolt (:func:`dispatch_http`)."""
        return await dispatch_http(self.app, request)

    # --- inbound -------------------------------------------------------------------

    def _register(self) -> None:
        for name in ("app_mention", "message", "reaction_added", "reaction_removed"):
            self.app.event(name)(self._on_event)
        self.app.event("agent_session_stopped")(self._on_session_stopped)
        # Any other request (another event type, a shortcut, a modal, app_rate_limited)
        # gets 200 from the error handler, not bolt's 404 (adapters.slack.unhandled).
        self.app.error(self._unhandled.handle)
        # Every slash command of the app (the stop command, /threadbot settings) goes
        # to the hub as a CommandInvoked; the hub answers a name it does not know.
        self.app.command(re.compile(r"^/.+"))(self._on_command)
        self.app.action(re.compile(r".*"))(self._on_action)

    async def _on_event(self, body: EventCallback, context: AsyncBoltContext) -> None:
        me = me_in(self.me, context, body)
        if me is None:
            return
        event = inbound_event(body, me, allow_bots=self._config.allow_bots)
        if event is not None and self._within_bot_cap(event):
            await self._deliver(event)

    async def _on_session_stopped(self, body: EventCallback, context: AsyncBoltContext) -> None:
        """Slack's stop button on a thread's agent session: the stop command there."""
        me = me_in(self.me, context, body)
        if me is None:
            return
        event = session_stopped(body, me, stop_command=self._config.stop_command)
        if event is not None:
            await self._deliver(event)

    async def _on_command(self, ack: Any, body: SlashCommand, context: AsyncBoltContext) -> None:
        await ack()
        me = me_in(self.me, context, body)
        if me is not None and (event := command_event(body, me)) is not None:
            await self._deliver(event)

    async def _on_action(self, ack: Any, body: BlockActions, context: AsyncBoltContext) -> None:
        await ack()
        me = me_in(self.me, context, body)
        if me is not None and (event := action_event(body, me)) is not None:
            await self._deliver(event)

    async def _deliver(self, event: InboundEvent) -> None:
        await hand_over(self._hub, event)

    def _within_bot_cap(self, event: InboundEvent) -> bool:
        return self._bots.allows(event, (event.ref.channel, event.ref.thread or event.ref.message))

    # --- outbound ------------------------------------------------------------------

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action`` (see :meth:`adapters.slack.sending.SlackSender.send`)."""
        return await self._sender.send(
            action, idempotency_key=idempotency_key, maybe_sent=maybe_sent
        )

    # --- streamed answers (conversations.adapter.AnswerStreamer; adapters.slack.streams) --

    @property
    def stream_limit(self) -> int:
        """Characters an answer's streamed preview may hold."""
        return self._sender.streams.limit

    async def start_stream(self, thread: PlatformRef, recipient: str, text: str) -> str:
        """``chat.startStream`` in ``thread`` for ``recipient``; the message's ts."""
        return await self._sender.streams.start(thread, recipient, text)

    async def append_stream(self, thread: PlatformRef, message: str, text: str) -> None:
        """``chat.appendStream`` of ``text`` to ``message``."""
        await self._sender.streams.append(thread, message, text)

    async def stop_stream(self, thread: PlatformRef, message: str, text: str) -> None:
        """``chat.stopStream`` of ``message``, ending with ``text``."""
        await self._sender.streams.stop(thread, message, text)

    async def left_open(self, thread: PlatformRef, openings: tuple[str, ...]) -> str | None:
        """A stream left open in ``thread`` by a process that died, if any (asked before
        the adapter started, the bot's user id comes from ``auth.test``; with installs,
        it is the thread's workspace's bot)."""
        user = self.me.user_id if self.me is not None else ""
        if self.installations is not None:
            found = await self.installations.async_find_bot(
                enterprise_id=None, team_id=thread.workspace
            )
            user = found.bot_user_id if found is not None else ""
            if not user:
                return None
        if not user:
            with contextlib.suppress(*UNREACHABLE):  # a refusal is a SlackClientError too
                data = (await self.client.auth_test()).data
                user = (text(data.get("user_id")) if isinstance(data, dict) else None) or ""
        return await self._sender.streams.left_open(thread, user, openings) if user else None
