"""A local fake of Discord (REST API and gateway), for running the real discord.py in tests.

``FakeDiscord`` is ONE aiohttp server on ``127.0.0.1`` (a free port) serving

* the REST API under ``/api/v10`` (``fake.api_url``), with the response shapes of
  https://discord.com/developers/docs/resources/ (user, application, message, channel,
  webhook, guild member) and /interactions/receiving-and-responding;
* the gateway websocket at ``/gateway`` (``fake.gateway_url``): plain JSON text frames,
  ``HELLO`` -> ``IDENTIFY`` -> ``READY`` + ``GUILD_CREATE``, heartbeats (op 1 -> op 11),
  dispatches ``{"op": 0, "t", "s", "d"}``, ``RESUME`` -> replayed dispatches + ``RESUMED``
  (https://discord.com/developers/docs/events/gateway).

Sharding (https://discord.com/developers/docs/events/gateway#sharding): several
connections may be open at once. One whose IDENTIFY names ``shard`` ``[id, count]``
gets READY and GUILD_CREATE for the guilds of that shard only (a guild's shard is
``(guild_id >> 22) % count``), and every dispatch (a test's or an echo) goes to the
connection of its guild's shard, DMs (no ``guild_id``) to shard 0; a connection that
names no shard gets everything. ``fake.add_guild(...)`` adds a guild with a text
channel; ``fake.gateway_shards`` is what ``GET /gateway/bot`` recommends;
``fake.connection_shards`` maps each connection to the shard it identified or resumed
as, and ``fake.sent_on_shard(id, t)`` gives the frames sent on that shard's connections.

Point discord.py at it (``fake.patch_discord_py()`` sets ``discord.http.Route.BASE`` and
``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` and restores both)::

    async with FakeDiscord() as fake:
        with fake.patch_discord_py():
            client = discord.Client(intents=intents, guild_ready_timeout=0.1)
            task = asyncio.create_task(client.start("fake-token"))
            await fake.wait_identified()
            await fake.dispatch("MESSAGE_CREATE", fixture["payload"]["d"])
            ...
            await client.close()

What discord.py needs from a server, and the fake does (found by driving discord.py 2.7.1):

* REST bodies are parsed only when ``Content-Type`` is exactly ``application/json``;
* a 429 must carry a ``Via`` header, or discord.py takes it for a Cloudflare ban and
  raises ``HTTPException`` at once instead of sleeping ``retry_after`` and retrying;
* interaction callbacks are posted with ``?with_response=1`` and need the 200
  "interaction callback response" body (a bare 204 makes ``defer()`` crash);
* ``on_ready`` fires ``guild_ready_timeout`` (default 2 s) after the last
  ``GUILD_CREATE``: pass ``guild_ready_timeout=0.1`` to the client in tests.

Every REST call is recorded in ``fake.calls`` (:class:`RecordedCall`) and every gateway
frame either way in ``fake.frames`` (:class:`GatewayRecord`); ``fake.log`` holds both in
order, and each record's ``seq`` comes from one counter, so ``a.seq < b.seq`` means ``a``
happened first (e.g. the interaction callback before the bot's first message).

State, kept the way Discord keeps it: ``fake.messages`` (id -> message object),
``fake.channels`` (id -> channel or thread object), ``fake.reactions`` (the bot's own),
``fake.interactions``, ``fake.commands``. Dispatching ``MESSAGE_CREATE``,
``THREAD_CREATE`` or ``INTERACTION_CREATE`` also stores what it carries, so the bot can
then create a thread from that message or answer that interaction.

Like Discord, the fake echoes the bot's own actions over the gateway (``echo=True``):
``MESSAGE_CREATE`` / ``MESSAGE_UPDATE`` / ``MESSAGE_DELETE`` for its messages,
``THREAD_CREATE`` / ``THREAD_UPDATE``, ``MESSAGE_REACTION_ADD`` / ``_REMOVE``, each only
when the identified intents ask for it.

Discord rules the fake applies (sources in the method docstrings): a nonce with
``enforce_nonce`` sent again by the same author within ``nonce_window`` seconds returns the
first message; content over 2000 characters is refused (50035), an empty message too
(50006); a second thread on a message fails (160004); an interaction must be answered
within ``interaction_timeout`` (3 s) of its dispatch, once (10062, 40060); the bot edits
only its own messages (50005); an archived thread refuses edits and reactions (50083).

Guild members (``GET /guilds/{guild}/members/{user}``, /resources/guild#get-guild-member):
everyone in ``HUMAN_USERS`` and the bot, with the fixtures' roles; add people with
``fake.add_member(user_id, username, nick=..., roles=...)`` and change roles with
``fake.set_roles(user_id, roles)``. A user who is no member answers 404 ``10007``.

Attachments (https://discord.com/developers/docs/resources/message#attachment-object):
``fake.attach(filename, content, content_type=...)`` returns an attachment object, to put
in a MESSAGE_CREATE's ``attachments``, whose ``url`` and ``proxy_url`` (``/attachments/...``
on this server, standing in for the CDN) serve ``content`` without any token; every
download is recorded with its headers in ``fake.downloads``
(:class:`tests.fakes.files.FileRequest`).

Components V2 (/components/using-message-components): a message posted or edited with
flag ``IS_COMPONENTS_V2`` (``1 << 15``) is refused with ``content`` or ``embeds``, more
than 40 components (nested ones counted) or more than 4,000 characters in its Text
Displays, and the flag cannot be removed by an edit; :func:`shown_text` reads what a
message shows (its content, or its Text Displays), :func:`all_components` walks nested
components. ``fake.typing(channel)`` gives the Trigger Typing Indicator calls
(``POST /channels/{id}/typing``, answered 204), ``fake.edits(message)`` the edits of a
message Discord took.

Failures on demand: ``fake.archive(thread_id)``, ``fake.rate_limit(path_prefix,
retry_after)`` and ``fake.fail(path_prefix, status, code, message)``; on the gateway,
``fake.close_connection(code, shard=...)``, ``fake.request_reconnect(shard=...)`` and
``fake.hold_resumes()`` (a RESUME is answered only once the test lets it go on).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import math
import mimetypes
import re
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import discord.gateway
import discord.http
import yarl
from aiohttp import WSCloseCode, WSMsgType, web
from aiohttp.web_request import FileField
from multidict import CIMultiDict

from tests.fakes.files import FileRequest, ServedFiles
from tests.fakes.local import LocalServer

# Defaults from the shared fixtures' identities.json (the fixtures' fake guild).
GUILD_ID = "1198205278617731073"
BOT_USER_ID = "1198930054348931074"
APPLICATION_ID = "1198930054348931074"
BOT_USERNAME = "agent-bot"
BOT_DISCRIMINATOR = "4242"  # as in the fixtures' mentions of the bot
TEXT_CHANNEL_ID = "1198206536908931078"
TEAM_ROLE_ID = "1198206788567171079"  # the role alice has in the fixtures
BOT_ROLE_ID = "1198930054348931090"  # the bot's managed role (not in the fixtures)
CUSTOM_EMOJI_ID = "1202553933004931080"
HUMAN_USERS: Mapping[str, tuple[str, str]] = {
    "573086210457731075": ("alice_fake", "Alice"),
    "673467649228931076": ("bob_fake", "Bob"),
}
OWNER_ID = "573086210457731075"

API_PREFIX = "/api/v10"
DISCORD_EPOCH_MS = 1420070400000
BOT_PERMISSIONS = "2248473465835073"  # the fixtures' app_permissions

# Gateway intents and application flags
# (https://discord.com/developers/docs/events/gateway#list-of-intents,
# /resources/application#application-object-application-flags).
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_PRESENCES = 1 << 8
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_GUILD_MESSAGE_REACTIONS = 1 << 10
INTENT_MESSAGE_CONTENT = 1 << 15
FLAG_GATEWAY_PRESENCE_LIMITED = 1 << 13
FLAG_GATEWAY_GUILD_MEMBERS_LIMITED = 1 << 15
FLAG_GATEWAY_MESSAGE_CONTENT_LIMITED = 1 << 19
FLAG_APPLICATION_COMMAND_BADGE = 1 << 23
DEFAULT_APP_FLAGS = (
    FLAG_GATEWAY_GUILD_MEMBERS_LIMITED
    | FLAG_GATEWAY_MESSAGE_CONTENT_LIMITED
    | FLAG_APPLICATION_COMMAND_BADGE
)
_PRIVILEGED = (
    (INTENT_GUILD_MEMBERS, (1 << 14) | FLAG_GATEWAY_GUILD_MEMBERS_LIMITED),
    (INTENT_GUILD_PRESENCES, (1 << 12) | FLAG_GATEWAY_PRESENCE_LIMITED),
    (INTENT_MESSAGE_CONTENT, (1 << 18) | FLAG_GATEWAY_MESSAGE_CONTENT_LIMITED),
)

# Message flags and types (/resources/message#message-object-message-flags, -types).
MSG_FLAG_HAS_THREAD = 1 << 5
MSG_FLAG_EPHEMERAL = 1 << 6
MSG_FLAG_LOADING = 1 << 7
MSG_FLAG_COMPONENTS_V2 = 1 << 15
V2_MAX_COMPONENTS = 40
V2_MAX_TEXT = 4000
COMPONENT_TEXT_DISPLAY = 10
MSG_TYPE_DEFAULT = 0
MSG_TYPE_CHAT_INPUT_COMMAND = 20

# Gateway opcodes (/topics/opcodes-and-status-codes#gateway-gateway-opcodes).
OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_PRESENCE = 0, 1, 2, 3
OP_VOICE_STATE, OP_RESUME, OP_RECONNECT, OP_REQUEST_MEMBERS = 4, 6, 7, 8
OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 9, 10, 11

JsonDict = dict[str, Any]

_sequence = itertools.count(1)


def next_seq() -> int:
    """The next number of the order shared by every record of the Discord fake."""
    return next(_sequence)


@dataclass
class UploadedFile:
    """A file sent in a multipart ``files[n]`` part."""

    field: str
    filename: str
    content_type: str
    content: bytes


@dataclass
class RecordedCall:
    """One REST call as the fake received it, and what it answered.

    ``path`` is the decoded path below ``/api/v10`` (``/channels/1/messages``); ``route``
    the matched template (``/channels/{channel_id}/messages``, ``""`` if none); ``json``
    the JSON body, or a multipart ``payload_json``; ``status`` and ``response`` are set
    once answered. ``seq`` orders it against every gateway frame.
    """

    method: str
    path: str
    json: Any
    headers: CIMultiDict[str]
    query: dict[str, str]
    seq: int
    time: float
    files: list[UploadedFile] = field(default_factory=list)
    route: str = ""
    status: int = 0
    response: Any = None


GatewayKind = Literal["connect", "sent", "received", "closed"]


@dataclass(frozen=True)
class GatewayRecord:
    """A gateway event: a connection opened or closed, a frame ``sent`` by the fake or
    ``received`` from the client. ``s`` is the gateway sequence of a dispatch; ``seq`` the
    order shared with :class:`RecordedCall`. A ``closed`` record carries the code of the
    close frame that ended the connection and who sent it first.
    """

    kind: GatewayKind
    seq: int
    time: float
    connection: int
    frame: JsonDict | None = None
    close_code: int | None = None
    closed_by: Literal["client", "server"] | None = None

    @property
    def op(self) -> int | None:
        return None if self.frame is None else self.frame.get("op")

    @property
    def t(self) -> str | None:
        return None if self.frame is None else self.frame.get("t")

    @property
    def s(self) -> int | None:
        return None if self.frame is None else self.frame.get("s")

    @property
    def d(self) -> Any:
        return None if self.frame is None else self.frame.get("d")


@dataclass
class Interaction:
    """An interaction dispatched to the bot, and how it was answered."""

    data: JsonDict
    dispatched_at: float
    callbacks: list[JsonDict] = field(default_factory=list)
    original_message_id: str | None = None

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def token(self) -> str:
        """The interaction's token; ``""`` (matching none) if a test dispatched none."""
        return str(self.data.get("token", ""))


class ApiError(Exception):
    """An error answer: ``{"message", "code"}`` (+ ``errors``) with an HTTP status."""

    def __init__(
        self, status: int, code: int, message: str, errors: JsonDict | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: JsonDict = {"message": message, "code": code}
        if errors is not None:
            self.body["errors"] = errors


def _unknown(what: str, code: int) -> ApiError:
    return ApiError(404, code, f"Unknown {what}")


def _form_error(field_name: str, code: str, message: str) -> ApiError:
    errors = {field_name: {"_errors": [{"code": code, "message": message}]}}
    return ApiError(400, 50035, "Invalid Form Body", errors)


THREAD_ARCHIVED = (400, 50083, "Thread is archived")


@dataclass
class _Injection:
    prefix: str
    method: str | None
    status: int
    body: JsonDict
    headers: dict[str, str]
    times: int


ShardPair = tuple[int, int]
"""IDENTIFY's ``shard``: ``(shard_id, num_shards)``."""


def shard_of(guild_id: str | int | None, count: int) -> int:
    """The shard a guild's events go to: ``(guild_id >> 22) % count``; 0 for a DM (None)."""
    return 0 if guild_id is None else (int(guild_id) >> 22) % count


@dataclass
class _Session:
    id: str
    intents: int
    s: int = 0
    sent: list[JsonDict] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None
    connection: int = 0
    shard: ShardPair | None = None

    @property
    def key(self) -> int | None:
        """The shard id this session serves (None: unsharded, every guild)."""
        return None if self.shard is None else self.shard[0]

    def serves(self, guild_id: str | None) -> bool:
        """Whether ``guild_id``'s events (None: a DM) go to this session."""
        if self.shard is None:
            return True
        shard_id, count = self.shard
        return shard_of(guild_id, count) == shard_id

    @property
    def open(self) -> bool:
        return self.ws is not None and not self.ws.closed


Reply = tuple[int, Any]
Handler = Callable[["FakeDiscord", RecordedCall, dict[str, str]], Awaitable[Reply]]


class FakeDiscord(LocalServer):
    """A local Discord REST API and gateway; see the module docstring."""

    def __init__(
        self,
        *,
        token: str | None = None,
        guild_id: str = GUILD_ID,
        guild_name: str = "Fake Guild",
        channel_id: str = TEXT_CHANNEL_ID,
        channel_name: str = "agent-work",
        bot_user_id: str = BOT_USER_ID,
        application_id: str = APPLICATION_ID,
        bot_username: str = BOT_USERNAME,
        app_flags: int = DEFAULT_APP_FLAGS,
        heartbeat_interval: int = 41250,
        echo: bool = True,
        nonce_window: float = 300.0,
        interaction_timeout: float | None = 3.0,
    ) -> None:
        self.token = token
        """If set, other tokens answer 401 (REST) or close 4004 (gateway)."""
        self.guild_id = guild_id
        """The first guild, the default of every payload that names none."""
        self.guild_name = guild_name
        self.guilds: dict[str, str] = {guild_id: guild_name}
        """Every guild the bot is in: id -> name (:meth:`add_guild` adds one)."""
        self.gateway_shards = 1
        """The shard count ``GET /gateway/bot`` recommends."""
        self.channel_id = channel_id
        self.channel_name = channel_name
        self.bot_user_id = bot_user_id
        self.application_id = application_id
        self.bot_username = bot_username
        self.app_flags = app_flags
        self.heartbeat_interval = heartbeat_interval
        self.echo = echo
        self.nonce_window = nonce_window
        self.interaction_timeout = interaction_timeout

        self.calls: list[RecordedCall] = []
        self.frames: list[GatewayRecord] = []
        self.log: list[RecordedCall | GatewayRecord] = []
        self.messages: dict[str, JsonDict] = {}
        self.channels: dict[str, JsonDict] = {}
        self.reactions: list[tuple[str, str, str]] = []
        """``(channel_id, message_id, emoji)`` of the bot's own reactions, in order."""
        self.interactions: dict[str, Interaction] = {}
        self.commands: dict[str | None, list[JsonDict]] = {}
        """Registered commands: ``commands[None]`` global, ``commands[guild_id]``."""
        self.identify: JsonDict | None = None
        """The ``d`` of the latest IDENTIFY (``identify["intents"]``, ``["token"]``)."""
        self.identifies: list[JsonDict] = []
        """The ``d`` of every IDENTIFY accepted, in order."""
        self.resumes: list[JsonDict] = []
        self.connections_made = 0
        self.connection_shards: dict[int, ShardPair | None] = {}
        """Per connection number, the shard its IDENTIFY or RESUME was for (None: none)."""

        self._users: dict[str, JsonDict] = {bot_user_id: self._bot_user()}
        for user_id, (username, global_name) in HUMAN_USERS.items():
            self._users[user_id] = _user(user_id, username, global_name)
        self._members: dict[str, JsonDict] = {}
        self._nonces: dict[tuple[str, str], tuple[float, str]] = {}
        self._injections: deque[_Injection] = deque()
        self._sessions: dict[str, _Session] = {}
        self._live: dict[int | None, _Session] = {}
        """The session of each shard id (None: unsharded), the latest identified or
        resumed last."""
        self._send_lock = asyncio.Lock()
        self._identified = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumes_go = asyncio.Event()
        self._resumes_go.set()
        self._sockets: set[web.WebSocketResponse] = set()
        self._server_closes: dict[web.WebSocketResponse, int] = {}
        self._snowflake_last = 0
        self._root = ""
        self._cdn = ServedFiles()
        self._seed()

    # -- lifecycle ---------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """The value for ``discord.http.Route.BASE``: ``http://127.0.0.1:PORT/api/v10``."""
        return self.root_url + API_PREFIX

    @property
    def gateway_url(self) -> str:
        """The websocket URL: ``ws://127.0.0.1:PORT/gateway``."""
        return "ws" + self.root_url[len("http") :] + "/gateway"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self._api)
        app.router.add_get("/attachments/{tail:.*}", self._cdn.handle)
        app.router.add_route("*", "/{tail:.*}", _not_found)
        await self.listen(app)

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await self._close(ws, WSCloseCode.GOING_AWAY, "FakeDiscord stopping.")
        await self.unlisten()

    @contextlib.contextmanager
    def patch_discord_py(self) -> Iterator[None]:
        """Point discord.py's REST base and first gateway URL here; restore both after."""
        route_base = discord.http.Route.BASE
        gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        discord.http.Route.BASE = self.api_url
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)
        try:
            yield
        finally:
            discord.http.Route.BASE = route_base
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway

    # -- test controls -----------------------------------------------------------

    def attach(
        self,
        filename: str,
        content: bytes,
        *,
        content_type: str | None = "application/octet-stream",
        channel: str | None = None,
        url: str | None = None,
    ) -> JsonDict:
        """An attachment object for ``content``, served here as the CDN serves it (no token).

        ``content_type`` None leaves the field out (Discord does when it cannot tell);
        ``url``: the object's ``url`` and ``proxy_url`` are that instead (another host).
        """
        attachment_id = self.snowflake()
        path = f"/attachments/{channel or self.channel_id}/{attachment_id}/{filename}"
        served_type = content_type or "application/octet-stream"
        self._cdn.add(path, content, content_type=served_type)
        signed = f"{self.root_url}{path}?ex=66f00000&is=66ee0000&hm=0a1b2c3d&"
        found: JsonDict = {
            "id": attachment_id,
            "filename": filename,
            "size": len(content),
            "url": url or signed,
            "proxy_url": url or signed,
        }
        if content_type is not None:
            found["content_type"] = content_type
        return found

    @property
    def downloads(self) -> list[FileRequest]:
        """Every request on the attachments' URLs, with its headers, in order."""
        return self._cdn.requests

    def rate_limit(
        self,
        path_prefix: str,
        retry_after: float = 0.0,
        *,
        method: str | None = None,
        times: int = 1,
        is_global: bool = False,
    ) -> None:
        """Answer the next ``times`` calls under ``path_prefix`` (below ``/api/v10``) 429.

        Body ``{"message", "retry_after", "global"}`` and the headers of
        https://discord.com/developers/docs/topics/rate-limits (``Retry-After``,
        ``X-RateLimit-*``), plus ``Via``: discord.py retries a 429 only when it has one.
        discord.py sleeps ``retry_after`` seconds before retrying: keep it small.
        """
        reset_after = max(retry_after, 0.0)
        headers = {
            "Retry-After": str(math.ceil(reset_after)),
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": uuid.uuid5(uuid.NAMESPACE_URL, path_prefix).hex,
            "X-RateLimit-Scope": "global" if is_global else "user",
            "Via": "1.1 google",
        }
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        body = {"message": "You are being rate limited.", "retry_after": retry_after}
        body["global"] = is_global
        self._injections.append(_Injection(path_prefix, method, 429, body, headers, times))

    def fail(
        self,
        path_prefix: str,
        status: int = 403,
        code: int = 50013,
        message: str = "Missing Permissions",
        *,
        method: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls under ``path_prefix`` with this error."""
        body = {"message": message, "code": code}
        self._injections.append(_Injection(path_prefix, method, status, body, {}, times))

    def archive(self, thread_id: str | int, *, locked: bool = True) -> None:
        """Archive a thread: until a ``PATCH /channels/{id}`` with ``archived: false``,
        edits, reactions and thread changes answer 400 ``{"code": 50083, "message":
        "Thread is archived"}``.

        ``locked=True`` (the default): posts fail the same way, as in a locked thread.
        ``locked=False``: a post reopens the thread, as Discord does for an unlocked one
        ("The API will helpfully automatically unarchive a thread when sending a
        message in that thread", /resources/channel#example-thread-channel).
        """
        thread = self.channels[str(thread_id)]
        metadata = thread["thread_metadata"]
        metadata["archived"] = True
        metadata["locked"] = locked
        metadata["archive_timestamp"] = _iso(datetime.now(UTC))

    def add_channel(self, channel: Mapping[str, Any]) -> JsonDict:
        """Store a channel or thread object (e.g. a fixture's ``THREAD_CREATE`` ``d``); one
        that names no guild is in the first guild, unless it is a DM (type 1 or 3)."""
        stored = copy.deepcopy(dict(channel))
        if stored.get("type") not in _DM_TYPES:
            stored.setdefault("guild_id", self.guild_id)
        self.channels[str(stored["id"])] = stored
        return stored

    def add_message(self, message: Mapping[str, Any]) -> JsonDict:
        """Store a message someone else wrote (e.g. a fixture's ``MESSAGE_CREATE`` ``d``)."""
        stored = copy.deepcopy(dict(message))
        self.messages[str(stored["id"])] = stored
        return stored

    def add_guild(
        self, guild_id: str, channel_id: str, *, name: str = "", channel_name: str = "general"
    ) -> JsonDict:
        """The bot joins guild ``guild_id``, which has the text channel ``channel_id``
        (returned): connections that identify from now on get its GUILD_CREATE, those
        of its shard only. Members and roles are the first guild's."""
        self.guilds[guild_id] = name or f"Guild {guild_id}"
        channel = _text_channel(guild_id, channel_id, channel_name)
        self.channels[channel_id] = channel
        return copy.deepcopy(channel)

    def add_member(
        self,
        user_id: str,
        username: str,
        *,
        global_name: str | None = None,
        nick: str | None = None,
        roles: Iterable[str] = (),
    ) -> JsonDict:
        """Make ``user_id`` a guild member (a copy of its member object, ``user`` inside)."""
        user = _user(user_id, username, global_name)
        self._users[user_id] = user
        member = _member(user, list(roles), "2024-01-25T09:00:00.000000+00:00")
        member["nick"] = nick
        self._members[user_id] = member
        return copy.deepcopy(member)

    def set_roles(self, user_id: str, roles: Iterable[str]) -> None:
        """Give the member ``user_id`` exactly ``roles`` (role ids), from now on."""
        self._members[user_id]["roles"] = list(roles)

    def posted(self, channel_id: str | int) -> list[JsonDict]:
        """The messages the bot created in ``channel_id``, oldest first."""
        return [
            m
            for m in self.messages.values()
            if m["channel_id"] == str(channel_id) and m["author"]["id"] == self.bot_user_id
        ]

    def typing(self, channel_id: str | int) -> list[RecordedCall]:
        """The bot's Trigger Typing Indicator calls in ``channel_id``, in order."""
        return self.calls_to("POST", path=f"/channels/{channel_id}/typing")

    def edits(self, message_id: str | int) -> list[RecordedCall]:
        """The bot's Edit Message calls of ``message_id`` that Discord took, in order."""
        return [
            c
            for c in self.calls
            if c.method == "PATCH"
            and c.route == _M
            and c.path.endswith(f"/messages/{message_id}")
            and c.status == 200
        ]

    def calls_to(
        self, method: str | None = None, *, route: str | None = None, path: str | None = None
    ) -> list[RecordedCall]:
        """Recorded calls filtered by method, route template and/or exact path."""
        return [
            c
            for c in self.calls
            if (method is None or c.method == method)
            and (route is None or c.route == route)
            and (path is None or c.path == path)
        ]

    def sent(self, t: str | None = None, *, op: int | None = None) -> list[GatewayRecord]:
        """Frames the fake sent, by dispatch name and/or opcode."""
        return [
            r
            for r in self.frames
            if r.kind == "sent" and (t is None or r.t == t) and (op is None or r.op == op)
        ]

    def sent_on_shard(self, shard_id: int, t: str | None = None) -> list[GatewayRecord]:
        """Frames the fake sent on the connections that identified or resumed as shard
        ``shard_id``, by dispatch name."""
        return [
            r
            for r in self.sent(t)
            if (pair := self.connection_shards.get(r.connection)) is not None
            and pair[0] == shard_id
        ]

    def received(self, op: int | None = None) -> list[GatewayRecord]:
        """Frames the client sent, by opcode."""
        return [r for r in self.frames if r.kind == "received" and (op is None or r.op == op)]

    # -- gateway controls --------------------------------------------------------

    async def wait_identified(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Wait until a client has identified (READY and GUILD_CREATE are sent)."""
        await asyncio.wait_for(self._identified.wait(), timeout)

    async def wait_resumed(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Wait until a client has resumed (missed dispatches and RESUMED are sent)."""
        await asyncio.wait_for(self._resumed.wait(), timeout)

    async def dispatch(self, name: str, d: Any, *, timeout: float = 5.0) -> int:  # noqa: ASYNC109
        """Send ``{"op": 0, "t": name, "s": s, "d": d}`` to the client connection of
        ``d``'s guild's shard (see the module docstring); return ``s``, that
        connection's sequence.

        Waits up to ``timeout`` for such a connection to be identified.
        ``MESSAGE_CREATE``, ``THREAD_CREATE`` and ``INTERACTION_CREATE`` also store what
        they carry.
        """
        self._absorb(name, d)
        guild = _guild_of(name, d)
        deadline = time.monotonic() + timeout
        while (session := self._session_for(guild)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no Discord gateway client is identified for guild {guild}")
            await asyncio.sleep(0.01)
        return await self._dispatch_to(session, name, d)

    def _session_for(self, guild_id: str | None, *, open_only: bool = True) -> _Session | None:
        """The session that gets ``guild_id``'s events (None: a DM), the latest
        identified or resumed if several would; ``open_only``: only while its
        connection is open (else what it is sent is kept for its RESUME)."""
        serving = [
            s for s in self._live.values() if s.serves(guild_id) and (s.open or not open_only)
        ]
        return serving[-1] if serving else None

    def _sessions_of(self, shard: int | None) -> list[_Session]:
        """The live sessions of shard id ``shard``; every one for None."""
        return [s for s in self._live.values() if shard is None or s.key == shard]

    async def request_reconnect(self, *, shard: int | None = None) -> None:
        """Send op 7 RECONNECT on the connection of shard id ``shard`` (None: on every
        connection): the client closes and resumes on ``resume_gateway_url``."""
        self._resumed.clear()
        for session in self._sessions_of(shard):
            if session.ws is not None:
                await self._send(session.ws, session.connection, {"op": OP_RECONNECT, "d": None})

    async def close_connection(self, code: int = 4000, *, shard: int | None = None) -> None:
        """Close the connection of shard id ``shard`` (None: every connection) from the
        server side (4000: the client resumes)."""
        self._resumed.clear()
        for session in self._sessions_of(shard):
            if session.ws is not None:
                await self._close(session.ws, code, "Closed by FakeDiscord.")

    @contextlib.contextmanager
    def hold_resumes(self) -> Iterator[None]:
        """Within the block, a RESUME is kept unanswered (no replay, no RESUMED) until
        the block ends: the client's new connection is open but not resumed meanwhile."""
        self._resumes_go.clear()
        try:
            yield
        finally:
            self._resumes_go.set()

    # -- REST --------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        path = request.path[len(API_PREFIX) :] or "/"
        bad_json = False
        try:
            body, files = await _read_body(request)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            body, files, bad_json = None, [], True
        call = RecordedCall(
            method=request.method,
            path=path,
            json=body,
            headers=CIMultiDict(request.headers),
            query=dict(request.query),
            seq=next_seq(),
            time=time.monotonic(),
            files=files,
        )
        self.calls.append(call)
        self.log.append(call)
        headers: dict[str, str] = {}
        injection = self._take_injection(request.method, path)
        if injection is not None:
            status, payload, headers = injection.status, dict(injection.body), injection.headers
        elif bad_json:
            status, payload = (
                400,
                {"message": "The request body contains invalid JSON.", "code": 50109},
            )
        else:
            try:
                status, payload = await self._route(call)
            except ApiError as exc:
                status, payload = exc.status, exc.body
        call.status, call.response = status, payload
        if status == 204:
            return web.Response(status=204, headers=headers)
        data = json.dumps(payload).encode()
        # Exactly "application/json": discord.py parses nothing else as JSON.
        headers["Content-Type"] = "application/json"
        return web.Response(status=status, body=data, headers=headers)

    async def _route(self, call: RecordedCall) -> Reply:
        allowed = False
        for method, pattern, template, handler in _ROUTES:
            match = pattern.fullmatch(call.path)
            if match is None:
                continue
            allowed = True
            if method != call.method:
                continue
            call.route = template
            if template.startswith(("/interactions/", "/webhooks/")):
                pass  # authenticated by the token in the path
            else:
                self._check_auth(call.headers)
            return await handler(self, call, match.groupdict())
        if allowed:
            raise ApiError(405, 0, "405: Method Not Allowed")
        raise ApiError(404, 0, "404: Not Found")

    def _check_auth(self, headers: Mapping[str, str]) -> None:
        auth = headers.get("Authorization", "")
        token = auth[len("Bot ") :] if auth.startswith("Bot ") else ""
        if not token or (self.token is not None and token != self.token):
            raise ApiError(401, 0, "401: Unauthorized")

    def _take_injection(self, method: str, path: str) -> _Injection | None:
        for injection in self._injections:
            if path.startswith(injection.prefix) and injection.method in (None, method):
                injection.times -= 1
                if injection.times <= 0:
                    self._injections.remove(injection)
                return injection
        return None

    async def _get_me(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        me = self._bot_user()
        me.update({"mfa_enabled": False, "locale": "en-US", "verified": True, "email": None})
        me.update({"flags": 0, "banner": None, "accent_color": None, "bio": ""})
        return 200, me

    async def _get_application(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        owner = self._users[OWNER_ID]
        return 200, {
            "id": self.application_id,
            "name": self.bot_username,
            "icon": None,
            "description": "",
            "summary": "",
            "type": None,
            "hook": True,
            "bot_public": False,
            "bot_require_code_grant": False,
            "bot": self._bot_user(),
            "owner": {k: owner[k] for k in ("id", "username", "avatar", "discriminator")},
            "team": None,
            "verify_key": "2f4d1a5c8b7e6f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718",
            "flags": self.app_flags,
            "guild_id": self.guild_id,
            "redirect_uris": [],
            "interactions_endpoint_url": None,
            "role_connections_verification_url": None,
            "event_webhooks_url": None,
            "event_webhooks_status": 1,
            "tags": [],
            "approximate_guild_count": 1,
            "approximate_user_install_count": 0,
            "install_params": {"scopes": ["applications.commands", "bot"], "permissions": "0"},
            "integration_types_config": {
                "0": {
                    "oauth2_install_params": {
                        "scopes": ["applications.commands", "bot"],
                        "permissions": BOT_PERMISSIONS,
                    }
                }
            },
        }

    async def _get_gateway(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        return 200, {"url": self.gateway_url}

    async def _get_gateway_bot(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        limit = {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}
        shards = self.gateway_shards
        return 200, {"url": self.gateway_url, "shards": shards, "session_start_limit": limit}

    async def _get_member(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Get Guild Member (/resources/guild#get-guild-member): 404 10004 / 10007 if unknown."""
        if p["guild_id"] not in self.guilds:
            raise _unknown("Guild", 10004)
        member = self._members.get(p["user_id"])
        if member is None:
            raise _unknown("Member", 10007)
        return 200, copy.deepcopy(member)

    async def _get_channel(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        return 200, copy.deepcopy(self._channel(p["channel_id"]))

    async def _patch_channel(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Edit a channel; for a thread ``archived`` / ``locked`` / ``auto_archive_duration``
        too. An archived thread accepts only a change that unarchives it (else 50083).
        """
        channel = self._channel(p["channel_id"])
        body = call.json if isinstance(call.json, dict) else {}
        metadata = channel.get("thread_metadata")
        if metadata is not None:
            if metadata["archived"] and body.get("archived") is not False:
                raise ApiError(*THREAD_ARCHIVED)
            for key in ("archived", "locked", "auto_archive_duration", "invitable"):
                if key in body:
                    metadata[key] = body[key]
            if "archived" in body:
                metadata["archive_timestamp"] = _iso(datetime.now(UTC))
        for key in ("name", "topic", "rate_limit_per_user", "flags", "nsfw"):
            if key in body:
                channel[key] = body[key]
        is_thread = metadata is not None
        event = "THREAD_UPDATE" if is_thread else "CHANNEL_UPDATE"
        await self._echo(event, copy.deepcopy(channel), INTENT_GUILDS)
        return 200, copy.deepcopy(channel)

    async def _list_messages(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        channel_id = str(self._channel(p["channel_id"])["id"])
        limit = int(call.query.get("limit", "50"))
        found = [m for m in self.messages.values() if m["channel_id"] == channel_id]
        found.sort(key=lambda m: int(m["id"]), reverse=True)
        if "before" in call.query:
            found = [m for m in found if int(m["id"]) < int(call.query["before"])]
        if "after" in call.query:
            found = [m for m in found if int(m["id"]) > int(call.query["after"])]
            found = found[-limit:]
        return 200, copy.deepcopy(found[:limit])

    async def _get_message(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        return 200, copy.deepcopy(self._message(p["channel_id"], p["message_id"]))

    async def _post_message(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Create Message (/resources/message#create-message).

        With ``nonce`` and ``enforce_nonce: true``, a second message from the same author
        with the same nonce within a few minutes returns the first and creates nothing
        ("deduped for the same sender within a few minutes", change log 2024-02-12).
        """
        channel = self._channel(p["channel_id"])
        body = call.json if isinstance(call.json, dict) else {}
        self._check_postable(channel)
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > 25:
            raise _form_error("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        key = (self.bot_user_id, str(nonce))
        if nonce is not None and body.get("enforce_nonce"):
            seen = self._nonces.get(key)
            if seen is not None and time.monotonic() - seen[0] <= self.nonce_window:
                first = self.messages.get(seen[1])
                if first is not None:
                    return 200, copy.deepcopy(first)
        _check_message_body(body, call.files)
        message = self._new_message(str(channel["id"]), body, call.files)
        if nonce is not None:
            self._nonces[key] = (time.monotonic(), message["id"])
        await self._echo("MESSAGE_CREATE", self._with_guild(message), INTENT_GUILD_MESSAGES)
        return 200, copy.deepcopy(message)

    async def _patch_message(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Edit Message: only the bot's own (50005); not in an archived thread (50083)."""
        message = self._message(p["channel_id"], p["message_id"])
        self._check_not_archived(p["channel_id"])
        if message["author"]["id"] != self.bot_user_id:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        body = call.json if isinstance(call.json, dict) else {}
        self._edit(message, body, call.files)
        await self._echo("MESSAGE_UPDATE", self._with_guild(message), INTENT_GUILD_MESSAGES)
        return 200, copy.deepcopy(message)

    async def _delete_message(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        message = self._message(p["channel_id"], p["message_id"])
        self._check_not_archived(p["channel_id"])
        del self.messages[str(message["id"])]
        gone = {"id": message["id"], "channel_id": message["channel_id"]}
        await self._echo("MESSAGE_DELETE", self._with_guild(gone), INTENT_GUILD_MESSAGES)
        return 204, None

    async def _put_reaction(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Create Reaction (204); an archived thread refuses it (50083)."""
        message = self._message(p["channel_id"], p["message_id"])
        self._check_not_archived(p["channel_id"])
        emoji = p["emoji"]
        entry = (str(message["channel_id"]), str(message["id"]), emoji)
        if entry not in self.reactions:
            self.reactions.append(entry)
            _count_reaction(message, _emoji(emoji), +1)
            event = self._reaction_event(message, emoji)
            event["member"] = copy.deepcopy(self._members[self.bot_user_id])
            event["message_author_id"] = message["author"]["id"]
            event["burst"] = False
            event["type"] = 0
            await self._echo("MESSAGE_REACTION_ADD", event, INTENT_GUILD_MESSAGE_REACTIONS)
        return 204, None

    async def _delete_reaction(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        message = self._message(p["channel_id"], p["message_id"])
        self._check_not_archived(p["channel_id"])
        entry = (str(message["channel_id"]), str(message["id"]), p["emoji"])
        if entry in self.reactions:
            self.reactions.remove(entry)
            _count_reaction(message, _emoji(p["emoji"]), -1)
            event = self._reaction_event(message, p["emoji"])
            event["burst"] = False
            event["type"] = 0
            await self._echo("MESSAGE_REACTION_REMOVE", event, INTENT_GUILD_MESSAGE_REACTIONS)
        return 204, None

    async def _start_thread(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Start Thread from Message: a public thread (type 11) whose id is the message id
        (/resources/channel#start-thread-from-message); once per message (160004).
        """
        parent = self._channel(p["channel_id"])
        if parent.get("type") not in (0, 5):
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        message = self._message(p["channel_id"], p["message_id"])
        body = call.json if isinstance(call.json, dict) else {}
        name = body.get("name")
        if not name:
            raise _form_error("name", "BASE_TYPE_REQUIRED", "This field is required")
        if str(message["id"]) in self.channels:
            raise ApiError(400, 160004, "A thread has already been created for this message")
        now = _iso(datetime.now(UTC))
        duration = body.get("auto_archive_duration") or parent.get(
            "default_auto_archive_duration", 4320
        )
        thread: JsonDict = {
            "id": str(message["id"]),
            "type": 11 if parent.get("type") == 0 else 10,
            "guild_id": str(parent.get("guild_id") or self.guild_id),
            "parent_id": str(parent["id"]),
            "owner_id": self.bot_user_id,
            "name": str(name),
            "last_message_id": None,
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": body.get("rate_limit_per_user") or 0,
            "flags": 0,
            "total_message_sent": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": duration,
                "archive_timestamp": now,
                "locked": False,
                "create_timestamp": now,
            },
            "member": {
                "id": str(message["id"]),
                "user_id": self.bot_user_id,
                "join_timestamp": now,
                "flags": 1,
            },
        }
        self.channels[thread["id"]] = thread
        message["flags"] = int(message.get("flags") or 0) | MSG_FLAG_HAS_THREAD
        message["thread"] = copy.deepcopy(thread)
        created = copy.deepcopy(thread)
        created["newly_created"] = True
        await self._echo("THREAD_CREATE", created, INTENT_GUILDS)
        return 201, copy.deepcopy(thread)

    async def _typing(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Trigger Typing Indicator (/resources/channel#trigger-typing-indicator): 204."""
        self._channel(p["channel_id"])
        return 204, None

    async def _join_thread(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        self._channel(p["channel_id"])
        self._check_not_archived(p["channel_id"])
        return 204, None

    async def _interaction_callback(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Create Interaction Response: 204, or 200 with the interaction callback response
        when ``with_response`` is true (/interactions/receiving-and-responding). Unknown,
        or later than ``interaction_timeout`` after the dispatch: 404 10062; answered
        before: 400 40060.
        """
        interaction = self.interactions.get(p["interaction_id"])
        if interaction is None or interaction.token != p["token"]:
            raise ApiError(404, 10062, "Unknown interaction")
        waited = time.monotonic() - interaction.dispatched_at
        if self.interaction_timeout is not None and waited > self.interaction_timeout:
            raise ApiError(404, 10062, "Unknown interaction")
        if interaction.callbacks:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
        body = call.json if isinstance(call.json, dict) else {}
        callback_type = int(body.get("type", 0))
        raw_data = body.get("data")
        data: JsonDict = raw_data if isinstance(raw_data, dict) else {}
        if callback_type == 4:
            _check_message_body(data, call.files)
        interaction.callbacks.append(copy.deepcopy(body))
        answer: JsonDict = {"id": interaction.id, "type": interaction.data.get("type")}
        resource: JsonDict | None = None
        if callback_type in (4, 5):
            flags = int(data.get("flags") or 0) & MSG_FLAG_EPHEMERAL
            if callback_type == 5:
                flags |= MSG_FLAG_LOADING
                message = self._interaction_message(interaction, {"content": ""}, [], flags)
            else:
                message = self._interaction_message(interaction, data, call.files, flags)
            interaction.original_message_id = message["id"]
            answer["response_message_id"] = message["id"]
            answer["response_message_loading"] = callback_type == 5
            answer["response_message_ephemeral"] = bool(flags & MSG_FLAG_EPHEMERAL)
            resource = {"type": callback_type}
            if callback_type == 4:
                resource["message"] = copy.deepcopy(message)
            if not flags & MSG_FLAG_EPHEMERAL:
                await self._echo("MESSAGE_CREATE", self._with_guild(message), INTENT_GUILD_MESSAGES)
        elif callback_type == 7:
            target = interaction.data.get("message")
            if isinstance(target, dict) and str(target.get("id")) in self.messages:
                message = self.messages[str(target["id"])]
                self._edit(message, data, call.files)
                interaction.original_message_id = message["id"]
                resource = {"type": 7, "message": copy.deepcopy(message)}
        elif callback_type == 6:
            target = interaction.data.get("message")
            if isinstance(target, dict):
                interaction.original_message_id = str(target.get("id"))
        if call.query.get("with_response", "").lower() not in ("1", "true"):
            return 204, None
        reply: JsonDict = {"interaction": answer}
        if resource is not None:
            reply["resource"] = resource
        return 200, reply

    async def _original(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Get / Edit / Delete Original Interaction Response."""
        interaction = self._interaction_for(p["application_id"], p["token"])
        if interaction.original_message_id is None:
            raise _unknown("Message", 10008)
        message = self.messages.get(interaction.original_message_id)
        if message is None:
            raise _unknown("Message", 10008)
        if call.method == "GET":
            return 200, copy.deepcopy(message)
        if call.method == "DELETE":
            del self.messages[str(message["id"])]
            return 204, None
        body = call.json if isinstance(call.json, dict) else {}
        self._check_not_archived(str(message["channel_id"]))
        self._edit(message, body, call.files)
        if not int(message.get("flags") or 0) & MSG_FLAG_EPHEMERAL:
            await self._echo("MESSAGE_UPDATE", self._with_guild(message), INTENT_GUILD_MESSAGES)
        return 200, copy.deepcopy(message)

    async def _followup(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Create Followup Message. Right after a deferred response (type 5) it edits the
        loading message instead, as the docs describe for backwards compatibility.
        """
        interaction = self._interaction_for(p["application_id"], p["token"])
        body = call.json if isinstance(call.json, dict) else {}
        _check_message_body(body, call.files)
        original = self.messages.get(interaction.original_message_id or "")
        if original is not None and int(original.get("flags") or 0) & MSG_FLAG_LOADING:
            self._edit(original, body, call.files)
            return 200, copy.deepcopy(original)
        flags = int(body.get("flags") or 0) & MSG_FLAG_EPHEMERAL
        message = self._interaction_message(interaction, body, call.files, flags)
        message["type"] = MSG_TYPE_DEFAULT
        if not flags:
            await self._echo("MESSAGE_CREATE", self._with_guild(message), INTENT_GUILD_MESSAGES)
        return 200, copy.deepcopy(message)

    async def _edit_followup(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        self._interaction_for(p["application_id"], p["token"])
        message = self.messages.get(p["message_id"])
        if message is None:
            raise _unknown("Message", 10008)
        if call.method == "GET":
            return 200, copy.deepcopy(message)
        if call.method == "DELETE":
            del self.messages[p["message_id"]]
            return 204, None
        body = call.json if isinstance(call.json, dict) else {}
        self._edit(message, body, call.files)
        return 200, copy.deepcopy(message)

    async def _commands(self, call: RecordedCall, p: dict[str, str]) -> Reply:
        """Get / Bulk Overwrite global or guild commands (echoed with ids, kept per scope)."""
        if p["application_id"] != self.application_id:
            raise _unknown("Application", 10002)
        scope = p.get("guild_id")
        if call.method == "GET":
            return 200, copy.deepcopy(self.commands.get(scope, []))
        body = call.json if isinstance(call.json, list) else []
        known = {c["name"]: c["id"] for c in self.commands.get(scope, [])}
        stored: list[JsonDict] = []
        for command in body:
            item = copy.deepcopy(command)
            item["id"] = known.get(item.get("name", ""), self.snowflake())
            item["application_id"] = self.application_id
            item.setdefault("type", 1)
            item.setdefault("description", "")
            item.setdefault("default_member_permissions", None)
            item.setdefault("nsfw", False)
            item["version"] = self.snowflake()
            if scope is not None:
                item["guild_id"] = scope
            stored.append(item)
        self.commands[scope] = stored
        return 200, copy.deepcopy(stored)

    # -- REST helpers ------------------------------------------------------------

    def _channel(self, channel_id: str) -> JsonDict:
        channel = self.channels.get(channel_id)
        if channel is None:
            raise _unknown("Channel", 10003)
        return channel

    def _message(self, channel_id: str, message_id: str) -> JsonDict:
        self._channel(channel_id)
        message = self.messages.get(message_id)
        if message is None or str(message.get("channel_id")) != channel_id:
            raise _unknown("Message", 10008)
        return message

    def _check_not_archived(self, channel_id: str) -> None:
        metadata = self.channels.get(channel_id, {}).get("thread_metadata")
        if metadata is not None and metadata.get("archived"):
            raise ApiError(*THREAD_ARCHIVED)

    def _check_postable(self, channel: JsonDict) -> None:
        metadata = channel.get("thread_metadata")
        if metadata is None or not metadata.get("archived"):
            return
        if metadata.get("locked"):
            raise ApiError(*THREAD_ARCHIVED)
        metadata["archived"] = False  # Discord reopens an unlocked thread on a post
        metadata["archive_timestamp"] = _iso(datetime.now(UTC))

    def _interaction_for(self, application_id: str, token: str) -> Interaction:
        # The newest with this token (the fixtures reuse one token; Discord's are unique).
        for interaction in reversed(self.interactions.values()):
            if interaction.token == token and application_id == self.application_id:
                return interaction
        raise _unknown("Webhook", 10015)

    def _new_message(
        self,
        channel_id: str,
        body: JsonDict,
        files: list[UploadedFile],
        *,
        flags: int = 0,
        msg_type: int = MSG_TYPE_DEFAULT,
    ) -> JsonDict:
        message_id = self.snowflake()
        message: JsonDict = {
            "id": message_id,
            "channel_id": channel_id,
            "author": self._bot_user(),
            "content": str(body.get("content") or ""),
            "timestamp": _iso(_snowflake_time(message_id)),
            "edited_timestamp": None,
            "tts": bool(body.get("tts", False)),
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": self._attachments(channel_id, body, files),
            "embeds": copy.deepcopy(body.get("embeds") or []),
            "pinned": False,
            "type": msg_type,
            "flags": flags | int(body.get("flags") or 0),
            "components": copy.deepcopy(body.get("components") or []),
        }
        if body.get("nonce") is not None:
            message["nonce"] = str(body["nonce"])
        reference = body.get("message_reference")
        if isinstance(reference, dict) and reference.get("message_id"):
            message["type"] = 19  # REPLY
            message["message_reference"] = {
                "type": 0,
                "message_id": str(reference["message_id"]),
                "channel_id": str(reference.get("channel_id") or channel_id),
                "guild_id": self._guild_of_channel(channel_id),
            }
            referenced = self.messages.get(str(reference["message_id"]))
            message["referenced_message"] = copy.deepcopy(referenced)
        channel = self.channels.get(channel_id)
        if channel is not None:
            channel["last_message_id"] = message_id
            if "thread_metadata" in channel:
                channel["message_count"] = _counter(channel.get("message_count")) + 1
                sent = _counter(channel.get("total_message_sent")) + 1
                channel["total_message_sent"] = sent
                message["position"] = sent - 1
        self.messages[message_id] = message
        return message

    def _interaction_message(
        self, interaction: Interaction, body: JsonDict, files: list[UploadedFile], flags: int
    ) -> JsonDict:
        d = interaction.data  # as dispatched: read defensively, a test may send it malformed
        channel_id = str(d.get("channel_id") or _field(d, "channel", "id") or "")
        msg_type = MSG_TYPE_CHAT_INPUT_COMMAND if d.get("type") == 2 else MSG_TYPE_DEFAULT
        message = self._new_message(channel_id, body, files, flags=flags, msg_type=msg_type)
        message["webhook_id"] = self.application_id
        message["application_id"] = self.application_id
        user = _field(d, "member", "user") or d.get("user") or {}
        message["interaction_metadata"] = {
            "id": interaction.id,
            "type": d.get("type"),
            "user": copy.deepcopy(user),
            "authorizing_integration_owners": copy.deepcopy(
                d.get("authorizing_integration_owners", {})
            ),
        }
        return message

    def _edit(self, message: JsonDict, body: JsonDict, files: list[UploadedFile]) -> None:
        was_v2 = bool(int(message.get("flags") or 0) & MSG_FLAG_COMPONENTS_V2)
        if was_v2 and "flags" in body and not int(body["flags"] or 0) & MSG_FLAG_COMPONENTS_V2:
            raise _form_error("flags", "MESSAGE_CANNOT_REMOVE_COMPONENTS_V2_FLAG", "Cannot remove")
        v2 = was_v2 or bool(int(body.get("flags") or 0) & MSG_FLAG_COMPONENTS_V2)
        if v2:
            _check_v2(body, files)
        if "content" in body and body["content"] is not None:
            content = str(body["content"])
            if len(content) > 2000:
                raise _form_error(
                    "content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length."
                )
            message["content"] = content
        for key in ("embeds", "components"):
            if key in body and body[key] is not None:
                message[key] = copy.deepcopy(body[key])
        if "flags" in body and body["flags"] is not None:
            message["flags"] = int(body["flags"])
        if files or "attachments" in body:
            message["attachments"] = self._attachments(
                str(message["channel_id"]), body, files, keep=message.get("attachments", [])
            )
        if int(message.get("flags") or 0) & MSG_FLAG_LOADING:
            message["flags"] = int(message["flags"]) & ~MSG_FLAG_LOADING
        else:
            message["edited_timestamp"] = _iso(datetime.now(UTC))

    def _attachments(
        self,
        channel_id: str,
        body: JsonDict,
        files: list[UploadedFile],
        keep: list[JsonDict] | None = None,
    ) -> list[JsonDict]:
        raw_listed = body.get("attachments")
        listed: list[Any] = raw_listed if isinstance(raw_listed, list) else []
        kept_ids = {str(a.get("id")) for a in listed if isinstance(a, dict)}
        result = [copy.deepcopy(a) for a in keep or [] if str(a["id"]) in kept_ids]
        for index, upload in enumerate(files):
            described = next(
                (a for a in listed if isinstance(a, dict) and a.get("id") == index), {}
            )
            attachment_id = self.snowflake()
            url = f"attachments/{channel_id}/{attachment_id}/{upload.filename}"
            attachment: JsonDict = {
                "id": attachment_id,
                "filename": upload.filename,
                "size": len(upload.content),
                "url": f"https://cdn.discordapp.com/{url}",
                "proxy_url": f"https://media.discordapp.net/{url}",
                "content_type": mimetypes.guess_type(upload.filename)[0] or upload.content_type,
            }
            if described.get("description"):
                attachment["description"] = described["description"]
            result.append(attachment)
        return result

    def _reaction_event(self, message: JsonDict, emoji: str) -> JsonDict:
        return {
            "user_id": self.bot_user_id,
            "channel_id": str(message["channel_id"]),
            "message_id": str(message["id"]),
            "guild_id": self._guild_of_channel(str(message["channel_id"])),
            "emoji": _emoji(emoji),
        }

    def _guild_of_channel(self, channel_id: str) -> str | None:
        """The guild of a channel: the first guild for an unknown one, None for a DM."""
        channel = self.channels.get(channel_id)
        if channel is None:
            return self.guild_id
        guild = channel.get("guild_id")
        return None if guild is None else str(guild)

    def _with_guild(self, payload: JsonDict) -> JsonDict:
        """``payload`` as the gateway tells it: with its channel's ``guild_id`` and, for a
        message of the bot, its ``member`` (nothing added in a DM)."""
        event = copy.deepcopy(payload)
        guild = self._guild_of_channel(str(event.get("channel_id")))
        if guild is None:
            return event
        event["guild_id"] = guild
        if "author" in event:
            member = copy.deepcopy(self._members[self.bot_user_id])
            member.pop("user", None)
            event["member"] = member
        return event

    # -- identity and guild --------------------------------------------------------

    def snowflake(self) -> str:
        """A new snowflake for now (ms since 2015 << 22, with an increment): increasing."""
        now = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        value = max(now, self._snowflake_last + 1)
        self._snowflake_last = value
        return str(value)

    def _bot_user(self) -> JsonDict:
        user = _user(self.bot_user_id, self.bot_username, None)
        user.update({"discriminator": BOT_DISCRIMINATOR, "bot": True, "public_flags": 524288})
        return user

    def _seed(self) -> None:
        self.channels[self.channel_id] = _text_channel(
            self.guild_id, self.channel_id, self.channel_name
        )
        joined = "2024-01-25T09:00:00.000000+00:00"
        for user_id, user in self._users.items():
            is_bot = user_id == self.bot_user_id
            self._members[user_id] = _member(
                user,
                [BOT_ROLE_ID] if is_bot else [TEAM_ROLE_ID],
                "2024-01-25T09:05:00.000000+00:00" if is_bot else joined,
            )

    def _guild_create(self, intents: int, guild_id: str | None = None) -> JsonDict:
        """The GUILD_CREATE ``d`` of ``guild_id`` (the first guild by default)."""
        guild_id = guild_id or self.guild_id
        # Without GUILD_PRESENCES Discord sends only the bot's own member here;
        # member_count counts everyone (discord.py then chunks if it has GUILD_MEMBERS).
        all_members = intents & INTENT_GUILD_PRESENCES
        members = list(self._members.values()) if all_members else [self._members[self.bot_user_id]]
        own = [c for c in self.channels.values() if str(c.get("guild_id")) == guild_id]
        threads = [
            copy.deepcopy(c)
            for c in own
            if "thread_metadata" in c and not c["thread_metadata"]["archived"]
        ]
        channels = [copy.deepcopy(c) for c in own if "thread_metadata" not in c]
        return {
            "id": guild_id,
            "name": self.guilds.get(guild_id, self.guild_name),
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": OWNER_ID,
            "application_id": None,
            "afk_channel_id": None,
            "afk_timeout": 300,
            "system_channel_id": channels[0]["id"] if channels else None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "safety_alerts_channel_id": None,
            "verification_level": 1,
            "default_message_notifications": 1,
            "explicit_content_filter": 2,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "premium_progress_bar_enabled": False,
            "preferred_locale": "en-US",
            "vanity_url_code": None,
            "max_members": 500000,
            "max_video_channel_users": 25,
            "features": [],
            "roles": self._roles(guild_id),
            "emojis": [
                {
                    "id": CUSTOM_EMOJI_ID,
                    "name": "approve",
                    "roles": [],
                    "require_colons": True,
                    "managed": False,
                    "animated": False,
                    "available": True,
                }
            ],
            "stickers": [],
            "joined_at": "2024-01-25T09:05:00.000000+00:00",
            "large": False,
            "unavailable": False,
            "lazy": True,
            "member_count": len(self._members),
            "members": copy.deepcopy(members),
            "channels": channels,
            "threads": threads,
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _roles(self, guild_id: str) -> list[JsonDict]:
        def role(role_id: str, name: str, permissions: str, position: int) -> JsonDict:
            return {
                "id": role_id,
                "name": name,
                "description": None,
                "permissions": permissions,
                "position": position,
                "color": 0,
                "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
                "hoist": False,
                "managed": False,
                "mentionable": False,
                "icon": None,
                "unicode_emoji": None,
                "flags": 0,
            }

        bot = role(BOT_ROLE_ID, self.bot_username, BOT_PERMISSIONS, 2)
        bot["managed"] = True
        bot["tags"] = {"bot_id": self.bot_user_id}
        return [
            role(guild_id, "@everyone", "2222085186637376", 0),
            role(TEAM_ROLE_ID, "team", "2248473465835073", 1),
            bot,
        ]

    def _absorb(self, name: str, d: Any) -> None:
        """Keep what a dispatch tells: the message, thread or interaction it carries."""
        if not isinstance(d, dict):
            return
        if name == "MESSAGE_CREATE" and "id" in d:
            message = copy.deepcopy(d)
            message.pop("member", None)
            message.pop("guild_id", None)
            self.messages.setdefault(str(d["id"]), message)
        elif name in ("THREAD_CREATE", "CHANNEL_CREATE") and "id" in d:
            channel = copy.deepcopy(d)
            channel.pop("newly_created", None)
            self.channels.setdefault(str(d["id"]), channel)
        elif name == "INTERACTION_CREATE" and "id" in d:
            self.interactions[str(d["id"])] = Interaction(copy.deepcopy(d), time.monotonic())
            partial = d.get("channel")
            if isinstance(partial, dict) and "id" in partial:
                if str(partial["id"]) not in self.channels:
                    self.add_channel(partial)
            target = d.get("message")
            if isinstance(target, dict) and "id" in target:
                self.messages.setdefault(str(target["id"]), copy.deepcopy(target))

    # -- gateway -------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        self.connections_made += 1
        number = self.connections_made
        self._sockets.add(ws)
        self._record("connect", number)
        hello = {
            "t": None,
            "s": None,
            "op": OP_HELLO,
            "d": {
                "heartbeat_interval": self.heartbeat_interval,
                "_trace": ['["gateway-prd-fake-1",{"micros":0.0}]'],
            },
        }
        client_code: int | None = None
        try:
            await self._send(ws, number, hello)
            while True:
                message = await ws.receive()
                if message.type == WSMsgType.TEXT:
                    await self._on_frame(ws, number, message.data)
                elif message.type == WSMsgType.BINARY:
                    await self._close(ws, 4002, "Error while decoding payload.")
                elif message.type == WSMsgType.CLOSE:
                    client_code = int(message.data)
                    break
                elif message.type in (WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                    break
        except ConnectionError:
            pass
        finally:
            self._sockets.discard(ws)
            server_code = self._server_closes.pop(ws, None)
            by: Literal["client", "server"] | None = "server" if server_code else None
            if client_code is not None and server_code is None:
                by = "client"
            code = server_code if server_code is not None else client_code
            self._record("closed", number, close_code=code, closed_by=by)
            for session in list(self._sessions.values()):
                if session.ws is ws:
                    session.ws = None
                    if by == "client" and code in (1000, 1001):
                        # Closing with 1000/1001 ends the session: it cannot be resumed.
                        del self._sessions[session.id]
                        if self._live.get(session.key) is session:
                            del self._live[session.key]
        return ws

    async def _on_frame(self, ws: web.WebSocketResponse, number: int, raw: str) -> None:
        try:
            frame = json.loads(raw)
        except json.JSONDecodeError:
            await self._close(ws, 4002, "Error while decoding payload.")
            return
        if not isinstance(frame, dict):
            await self._close(ws, 4002, "Error while decoding payload.")
            return
        self._record("received", number, frame=frame)
        op, d = frame.get("op"), frame.get("d")
        if op == OP_HEARTBEAT:
            await self._send(ws, number, {"t": None, "s": None, "op": OP_HEARTBEAT_ACK, "d": None})
        elif op == OP_IDENTIFY and isinstance(d, dict):
            await self._on_identify(ws, number, d)
        elif op == OP_RESUME and isinstance(d, dict):
            await self._on_resume(ws, number, d)
        elif op == OP_REQUEST_MEMBERS and isinstance(d, dict):
            await self._on_request_members(d)
        elif op in (OP_PRESENCE, OP_VOICE_STATE):
            pass
        else:
            await self._close(ws, 4001, "Unknown opcode.")

    async def _on_identify(self, ws: web.WebSocketResponse, number: int, d: JsonDict) -> None:
        if any(s.ws is ws for s in self._sessions.values()):
            await self._close(ws, 4005, "Already authenticated.")
            return
        if self.token is not None and d.get("token") != self.token:
            await self._close(ws, 4004, "Authentication failed.")
            return
        intents = int(d.get("intents", 0))
        for intent, flags in _PRIVILEGED:
            if intents & intent and not self.app_flags & flags:
                await self._close(ws, 4014, "Disallowed intent(s).")
                return
        shard = _shard_pair(d.get("shard"))
        if "shard" in d and shard is None:
            await self._close(ws, 4010, "Invalid shard.")
            return
        self.identify = copy.deepcopy(d)
        self.identifies.append(copy.deepcopy(d))
        session = _Session(
            id=uuid.uuid4().hex, intents=intents, ws=ws, connection=number, shard=shard
        )
        self._sessions[session.id] = session
        self._make_live(session)
        guilds = [g for g in self.guilds if session.serves(g)]
        ready = {
            "v": 10,
            "user": self._bot_user() | {"verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [{"id": guild, "unavailable": True} for guild in guilds],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": self.application_id, "flags": self.app_flags},
            "user_settings": {},
            "private_channels": [],
            "presences": [],
            "relationships": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": ["rotterdam", "madrid", "milan"],
            "auth": {},
            "_trace": ['["gateway-prd-fake-1",{"micros":0.0}]'],
        }
        if shard is not None:
            ready["shard"] = list(shard)
        await self._dispatch_to(session, "READY", ready)
        for guild in guilds:
            await self._dispatch_to(session, "GUILD_CREATE", self._guild_create(intents, guild))
        self._identified.set()

    def _make_live(self, session: _Session) -> None:
        """``session`` is its shard's connection now (the latest of them)."""
        self._live.pop(session.key, None)
        self._live[session.key] = session
        self.connection_shards[session.connection] = session.shard

    async def _on_resume(self, ws: web.WebSocketResponse, number: int, d: JsonDict) -> None:
        self.resumes.append(copy.deepcopy(d))
        await self._resumes_go.wait()
        session = self._sessions.get(str(d.get("session_id")))
        if session is None or (self.token is not None and d.get("token") != self.token):
            await self._send(
                ws, number, {"t": None, "s": None, "op": OP_INVALID_SESSION, "d": False}
            )
            return
        session.ws, session.connection = ws, number
        self._make_live(session)
        last = int(d.get("seq") or 0)
        async with self._send_lock:
            for frame in session.sent:
                if int(frame["s"]) > last:
                    await self._send(ws, number, frame)
            await self._dispatch_locked(session, "RESUMED", {"_trace": ['["gateway-prd-fake-1"]']})
        self._resumed.set()

    async def _on_request_members(self, d: JsonDict) -> None:
        guild = str(d.get("guild_id") or self.guild_id)
        session = self._session_for(guild)
        if session is None:
            return
        chunk: JsonDict = {
            "guild_id": guild,
            "members": copy.deepcopy(list(self._members.values())),
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [],
        }
        if "nonce" in d:
            chunk["nonce"] = d["nonce"]
        await self._dispatch_to(session, "GUILD_MEMBERS_CHUNK", chunk)

    async def _echo(self, name: str, d: JsonDict, intent: int) -> None:
        """Send what Discord would tell the bot about its own action, if it asked, on the
        connection of the shard of ``d``'s guild."""
        session = self._session_for(_guild_of(name, d), open_only=False)
        if not self.echo or session is None or not session.intents & intent:
            return
        await self._dispatch_to(session, name, d)

    async def _dispatch_to(self, session: _Session, name: str, d: Any) -> int:
        async with self._send_lock:
            return await self._dispatch_locked(session, name, d)

    async def _dispatch_locked(self, session: _Session, name: str, d: Any) -> int:
        session.s += 1
        frame = {"t": name, "s": session.s, "op": OP_DISPATCH, "d": d}
        session.sent.append(frame)  # kept for a RESUME
        if session.ws is not None and not session.ws.closed:
            await self._send(session.ws, session.connection, frame)
        return session.s

    async def _close(self, ws: web.WebSocketResponse, code: int, reason: str) -> None:
        self._server_closes.setdefault(ws, code)
        await ws.close(code=code, message=reason.encode())

    async def _send(self, ws: web.WebSocketResponse, number: int, frame: JsonDict) -> None:
        self._record("sent", number, frame=frame)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_str(json.dumps(frame))

    def _record(
        self,
        kind: GatewayKind,
        connection: int,
        *,
        frame: JsonDict | None = None,
        close_code: int | None = None,
        closed_by: Literal["client", "server"] | None = None,
    ) -> None:
        record = GatewayRecord(
            kind=kind,
            seq=next_seq(),
            time=time.monotonic(),
            connection=connection,
            frame=frame,
            close_code=close_code,
            closed_by=closed_by,
        )
        self.frames.append(record)
        self.log.append(record)


# -- module helpers ------------------------------------------------------------------

_DM_TYPES = (1, 3)
"""Channel types DM and GROUP_DM (/resources/channel#channel-object-channel-types)."""
_GUILD_EVENTS = ("GUILD_CREATE", "GUILD_UPDATE", "GUILD_DELETE")
"""Dispatches whose ``d`` is the guild itself (its ``id``, no ``guild_id``)."""


def _guild_of(name: str, d: Any) -> str | None:
    """The guild a dispatch is about (None: a DM, or no guild named)."""
    if not isinstance(d, dict):
        return None
    guild = d.get("guild_id")
    if guild is None and name in _GUILD_EVENTS:
        guild = d.get("id")
    return None if guild is None else str(guild)


def _shard_pair(value: Any) -> ShardPair | None:
    """IDENTIFY's ``shard`` as ``(id, count)`` when it is two integers with
    ``0 <= id < count``, else None (Discord closes with 4010, Invalid shard)."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    shard_id, count = value
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (shard_id, count)):
        return None
    return (shard_id, count) if 0 <= shard_id < count else None


def _text_channel(guild_id: str, channel_id: str, name: str) -> JsonDict:
    """A guild text channel object (/resources/channel#channel-object)."""
    return {
        "id": channel_id,
        "type": 0,
        "guild_id": guild_id,
        "name": name,
        "position": 0,
        "permission_overwrites": [],
        "topic": None,
        "nsfw": False,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "parent_id": None,
        "default_auto_archive_duration": 1440,
        "default_thread_rate_limit_per_user": 0,
        "flags": 0,
    }


def _field(d: Mapping[str, Any], outer: str, inner: str) -> Any:
    """``d[outer][inner]`` when ``d[outer]`` is an object, else None."""
    value = d.get(outer)
    return value.get(inner) if isinstance(value, dict) else None


def _user(user_id: str, username: str, global_name: str | None) -> JsonDict:
    return {
        "id": user_id,
        "username": username,
        "global_name": global_name,
        "discriminator": "0",
        "avatar": None,
        "avatar_decoration_data": None,
        "public_flags": 0,
        "primary_guild": None,
    }


def _member(user: JsonDict, roles: list[str], joined_at: str) -> JsonDict:
    """A guild member object (/resources/guild#guild-member-object) for ``user``."""
    return {
        "user": copy.deepcopy(user),
        "nick": None,
        "avatar": None,
        "banner": None,
        "roles": roles,
        "joined_at": joined_at,
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "communication_disabled_until": None,
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


def _snowflake_time(snowflake: str) -> datetime:
    millis = (int(snowflake) >> 22) + DISCORD_EPOCH_MS
    return datetime.fromtimestamp(millis / 1000, UTC)


def _emoji(emoji: str) -> JsonDict:
    """``name:id`` (custom) or a unicode emoji, as the reaction path carries it."""
    name, _, emoji_id = emoji.rpartition(":")
    if name and emoji_id.isdigit():
        return {"id": emoji_id, "name": name}
    return {"id": None, "name": emoji}


def _count_reaction(message: JsonDict, emoji: JsonDict, delta: int) -> None:
    reactions: list[JsonDict] = message.setdefault("reactions", [])
    for reaction in reactions:
        if reaction["emoji"] == emoji:
            reaction["count"] += delta
            reaction["count_details"]["normal"] += delta
            reaction["me"] = delta > 0
            if reaction["count"] <= 0:
                reactions.remove(reaction)
            return
    if delta > 0:
        reactions.append(
            {
                "emoji": emoji,
                "count": 1,
                "count_details": {"burst": 0, "normal": 1},
                "burst_colors": [],
                "me": True,
                "me_burst": False,
            }
        )
    if not reactions:
        message.pop("reactions")


def shown_text(message: Mapping[str, Any]) -> str:
    """What a message shows as text: its ``content``, or for a Components V2 message its
    Text Displays' contents, nested ones too, one per line."""
    if int(message.get("flags") or 0) & MSG_FLAG_COMPONENTS_V2:
        return "\n".join(display_texts(message.get("components") or []))
    return str(message.get("content") or "")


def display_texts(components: Iterable[Mapping[str, Any]]) -> list[str]:
    """The contents of the Text Displays in ``components``, nested ones too, in order."""
    texts: list[str] = []
    for component in components:
        if component.get("type") == COMPONENT_TEXT_DISPLAY:
            texts.append(str(component.get("content") or ""))
        texts += display_texts(component.get("components") or [])
    return texts


def all_components(components: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every component in ``components``, nested ones too (a button in a row in a
    container), in order."""
    found: list[Mapping[str, Any]] = []
    for component in components:
        found.append(component)
        found += all_components(component.get("components") or [])
        accessory = component.get("accessory")
        if isinstance(accessory, Mapping):
            found.append(accessory)
    return found


def _check_v2(body: JsonDict, files: list[UploadedFile]) -> None:
    """Components V2 rules (/components/using-message-components, /components/reference):
    no ``content`` or ``embeds``, at most 40 components with the nested ones, at most
    4,000 characters of text in them."""
    if body.get("content") or body.get("embeds"):
        raise _form_error(
            "content", "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2", "Not allowed"
        )
    components = body.get("components") or []
    if len(all_components(components)) > V2_MAX_COMPONENTS:
        raise _form_error("components", "BASE_TYPE_MAX_LENGTH", "Must be 40 or fewer in length.")
    if sum(len(t) for t in display_texts(components)) > V2_MAX_TEXT:
        raise _form_error("components", "BASE_TYPE_MAX_LENGTH", "Must be 4000 or fewer in length.")


def _check_message_body(body: JsonDict, files: list[UploadedFile]) -> None:
    if int(body.get("flags") or 0) & MSG_FLAG_COMPONENTS_V2:
        _check_v2(body, files)
        if not body.get("components"):
            raise ApiError(400, 50006, "Cannot send an empty message")
        return
    content = str(body.get("content") or "")
    if len(content) > 2000:
        raise _form_error("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
    keys = ("embeds", "components", "sticker_ids", "poll")
    if not content and not files and not any(body.get(k) for k in keys):
        raise ApiError(400, 50006, "Cannot send an empty message")


async def _read_body(request: web.Request) -> tuple[Any, list[UploadedFile]]:
    if not request.can_read_body:
        return None, []
    if request.content_type == "application/json":
        raw = await request.text()
        return (json.loads(raw) if raw.strip() else None), []
    if request.content_type == "multipart/form-data":
        form = await request.post()
        payload: Any = None
        files: list[UploadedFile] = []
        for name, value in form.items():
            if isinstance(value, FileField):
                content = value.file.read()
                files.append(UploadedFile(name, value.filename, value.content_type, content))
            elif name == "payload_json":
                text = value.decode() if isinstance(value, bytes) else str(value)
                payload = json.loads(text)
        return payload, files
    return await request.read(), []


async def _not_found(request: web.Request) -> web.StreamResponse:
    body = json.dumps({"message": "404: Not Found", "code": 0}).encode()
    return web.Response(status=404, body=body, headers={"Content-Type": "application/json"})


_C = "/channels/{channel_id}"
_M = _C + "/messages/{message_id}"
_W = "/webhooks/{application_id}/{token}"
_ROUTE_TABLE: list[tuple[str, str, Handler]] = [
    ("GET", "/users/@me", FakeDiscord._get_me),
    ("GET", "/oauth2/applications/@me", FakeDiscord._get_application),
    ("GET", "/applications/@me", FakeDiscord._get_application),
    ("GET", "/gateway", FakeDiscord._get_gateway),
    ("GET", "/gateway/bot", FakeDiscord._get_gateway_bot),
    ("GET", "/guilds/{guild_id}/members/{user_id}", FakeDiscord._get_member),
    ("GET", _C, FakeDiscord._get_channel),
    ("PATCH", _C, FakeDiscord._patch_channel),
    ("GET", _C + "/messages", FakeDiscord._list_messages),
    ("POST", _C + "/messages", FakeDiscord._post_message),
    ("GET", _M, FakeDiscord._get_message),
    ("PATCH", _M, FakeDiscord._patch_message),
    ("DELETE", _M, FakeDiscord._delete_message),
    ("PUT", _M + "/reactions/{emoji}/@me", FakeDiscord._put_reaction),
    ("DELETE", _M + "/reactions/{emoji}/@me", FakeDiscord._delete_reaction),
    ("POST", _M + "/threads", FakeDiscord._start_thread),
    ("PUT", _C + "/thread-members/@me", FakeDiscord._join_thread),
    ("POST", _C + "/typing", FakeDiscord._typing),
    ("POST", "/interactions/{interaction_id}/{token}/callback", FakeDiscord._interaction_callback),
    ("GET", _W + "/messages/@original", FakeDiscord._original),
    ("PATCH", _W + "/messages/@original", FakeDiscord._original),
    ("DELETE", _W + "/messages/@original", FakeDiscord._original),
    ("POST", _W, FakeDiscord._followup),
    ("GET", _W + "/messages/{message_id}", FakeDiscord._edit_followup),
    ("PATCH", _W + "/messages/{message_id}", FakeDiscord._edit_followup),
    ("DELETE", _W + "/messages/{message_id}", FakeDiscord._edit_followup),
    ("GET", "/applications/{application_id}/commands", FakeDiscord._commands),
    ("PUT", "/applications/{application_id}/commands", FakeDiscord._commands),
    ("GET", "/applications/{application_id}/guilds/{guild_id}/commands", FakeDiscord._commands),
    ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", FakeDiscord._commands),
]


def _compile(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\w+\})", template)
    regex = "".join(
        f"(?P<{part[1:-1]}>[^/]+)" if part.startswith("{") else re.escape(part) for part in parts
    )
    return re.compile(regex)


_ROUTES = [(method, _compile(t), t, handler) for method, t, handler in _ROUTE_TABLE]


def _counter(value: object) -> int:
    """A channel's counter as stored, 0 when a mutated payload left something else there."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
