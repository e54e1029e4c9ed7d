"""A local fake of the Slack Web API, for running the real slack-sdk / slack-bolt in tests.

``FakeSlackApi`` serves ``GET|POST /api/{method}`` on ``127.0.0.1`` (a free port) and
answers with the response shapes documented at https://docs.slack.dev/reference/methods.
Point the real client at it (``api.base_url`` ends in ``/api/``; slack-sdk 3.48 adds a
missing trailing slash itself, and any other path answers 404 with a hint)::

    async with FakeSlackApi() as api:
        client = AsyncWebClient(base_url=api.base_url, token="xoxb-test")
        await client.chat_postMessage(channel="C0PROJ0001", thread_ts=root, text="Hi")
        assert api.posted_texts("C0PROJ0001") == ["Hi"]

Arguments are taken from the query string and from a form-encoded or JSON body, the
way Slack accepts them (slack-sdk sends many methods' arguments as query parameters
even on ``POST``, and some methods as ``GET``). Every call is recorded in
``api.calls`` (:class:`RecordedCall`), whatever was answered.

Methods: ``auth.test``, ``bots.info``, ``users.info``, ``chat.postMessage``,
``chat.postEphemeral``, ``chat.update``, ``reactions.add``, ``conversations.replies``,
``agents.sessions.setStatus`` (``api.sessions`` by thread, ``api.session_statuses(channel,
thread_ts)``; ``api.session_warning`` answers with a warning, ``api.fail(...)`` refuses),
``chat.startStream`` / ``chat.appendStream`` / ``chat.stopStream`` (a streamed message:
``api.streams`` by ts, each with its ``chunks`` as each call that Slack took gave them and
its ``state``; the message is in the thread and in ``posted_texts`` as its text grows;
``api.stream_expiry = N`` ends every stream after N appends, so the next append or stop
answers ``message_not_in_streaming_state``, as a stream Slack ended does, and
``api.expire_streams()`` ends the open ones now),
``plan`` blocks in posts and edits (``api.plan_blocks = False`` refuses them with
``invalid_blocks``, as a workspace without them; ``api.plan_states(channel, ts)`` the
task cards' statuses of each post or edit of a message, with the ``clock`` time),
``usergroups.users.list`` (the members of ``api.groups``, set with
``api.set_group(group_id, members)``; an unknown group answers ``no_such_subteam``),
``files.getUploadURLExternal`` + the upload ``POST`` + ``files.completeUploadExternal``
(what ``AsyncWebClient.files_upload_v2`` does), ``apps.connections.open`` (the
Socket Mode URL: ``FakeSlackApi(socket_url=...)`` or ``api.socket_url = ...``), and
``oauth.v2.access`` with Slack's consent page ``/oauth/v2/authorize`` (other workspaces,
each answered as itself by its token, and the install flow: ``api.add_workspace``,
``api.consent``, ``api.revoke``; :mod:`tests.fakes.slack_installs`). Others answer
``{"ok": false, "error": "unknown_method"}``.

Tokens are checked the way Slack does: none at all answers ``not_authed``; an app
token (``xapp-``) is required by ``apps.connections.open`` and refused elsewhere (but
``auth.test``) with ``not_allowed_token_type``. The upload ``POST`` itself is not an API
call: it is not in ``api.calls``; ``api.files`` holds what was uploaded.

Files people share are served as ``files.slack.com`` serves them: ``api.share_file(name,
content, mimetype=...)`` returns Slack's file object (https://api.slack.com/types/file),
to put in a message event's ``files``, whose ``url_private`` and
``url_private_download`` (``/files-pri/{team}-{id}/...`` on this server) answer only
``Authorization: Bearer {file_token}`` (``xoxb-test``; 403 otherwise) and can redirect
elsewhere on demand (``redirect_to=``); every download is recorded with its headers in
``api.downloads`` (:class:`tests.fakes.files.FileRequest`).

Messages posted (and shared files) are kept per channel, so a test asserts what a
person would see: ``api.thread(channel, thread_ts)``, ``api.posted_texts(channel)``.
Seed messages the bot did not write (the user's mention that opens a thread) with
``api.add_message(...)``.

Failures on demand, consumed in the order they were asked for, per method:
``api.rate_limit(method, times=N, retry_after=30)`` (HTTP 429, ``Retry-After``, body
``{"ok": false, "error": "ratelimited"}``: what slack-sdk's
``AsyncRateLimitErrorRetryHandler`` retries on) and
``api.fail(method, error="channel_not_found", times=1)`` and ``api.outage(method,
status=502, times=1)`` (the error page a proxy in front of Slack answers with:
:data:`BAD_GATEWAY_PAGE`, HTML, or any body and content type; not Slack's JSON, and
it is recorded as ``{}``); with ``channel=...`` only
calls for that channel use them up (Slack limits ``chat.postMessage`` per channel:
https://docs.slack.dev/apis/web-api/rate-limits). slack-sdk's handler sleeps
``Retry-After`` plus up to one random second, so keep ``retry_after=0`` for clients
that have it. ``api.rate_limit_window(methods, seconds=45)`` answers every call of
``methods`` with 429 until ``seconds`` have passed on the fake's ``clock`` (an
injectable ``now()`` callable, ``time.monotonic`` by default, so a test can share a
scaled or virtual clock with the bot); ``Retry-After`` is the time left, in whole
seconds, unless ``retry_after`` is given.

:func:`sign` makes the ``X-Slack-Request-Timestamp`` / ``X-Slack-Signature`` headers
for posting a (fixture) body to a bolt app with a test signing secret.

Slow answers on demand: ``FakeSlackApi(post_delay=0.3)`` answers every
``chat.postMessage`` and ``chat.update`` that many seconds after it took the call
(the message is posted, or edited, at once; only the answer is late, as over a slow
network). Two bot processes that both deliver one message show it only then: the
second starts before the first is told it went out. The default, 0, answers at once.

Every recorded call (and every entry of ``FakeSocketModeServer.log``) carries ``seq``,
from one counter shared by both fakes, so a test can tell which happened first.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import hmac
import itertools
import json
import math
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from aiohttp import web
from aiohttp.web_request import FileField
from multidict import CIMultiDict

from tests.fakes.files import FileRequest, ServedFiles
from tests.fakes.local import LocalServer
from tests.fakes.slack_installs import FakeWorkspace, Installs

# Defaults from the shared fixtures' identities.json (the fixtures' fake workspace).
TEAM_ID = "T0AGT00001"
TEAM_NAME = "Fake Workspace"
TEAM_DOMAIN = "fakeworkspace"
APP_ID = "A0AGT00001"
BOT_USER_ID = "U0AGTBOT01"
BOT_ID = "B0AGTBOT01"
BOT_NAME = "threadbot"
HUMAN_USERS: Mapping[str, str] = {"U0ALICE001": "alice", "U0BOB00001": "bob"}
OTHER_APP = {"user": "U0OTHBOT01", "bot_id": "B0OTHBOT01", "app_id": "A0OTHAPP01"}

JsonDict = dict[str, Any]

_sequence = itertools.count(1)


def next_seq() -> int:
    """The next number of the order shared by the Slack fakes' records."""
    return next(_sequence)


def sign(body: str | bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack request-signing headers for ``body`` (v0, HMAC-SHA256 of ``v0:{ts}:{body}``).

    ``timestamp`` defaults to now: bolt refuses requests more than five minutes old.
    """
    ts = int(time.time()) if timestamp is None else timestamp
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + str(ts).encode() + b":" + raw
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={digest}"}


@dataclass(frozen=True)
class RecordedCall:
    """One Web API call as the fake received it, and what it answered.

    ``args`` merges query parameters and the body (form or JSON); the values of
    ``metadata``, ``blocks``, ``attachments`` and ``files`` are decoded when they were
    sent as JSON strings; other form values stay strings (booleans arrive as "1"/"0").
    ``time`` is ``time.monotonic()`` on arrival; ``seq`` orders it against every other
    record of the Slack fakes.
    """

    method: str
    args: JsonDict
    headers: CIMultiDict[str]
    time: float
    seq: int
    http_method: str = "POST"
    status: int = 200
    response: JsonDict = field(default_factory=dict)
    at: float = 0.0
    """The fake's ``clock`` on arrival (a test's virtual time, when it shares one)."""

    @property
    def token(self) -> str | None:
        """The token sent, from ``Authorization: Bearer`` or a ``token`` argument."""
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth[len("Bearer ") :]
        token = self.args.get("token")
        return token if isinstance(token, str) else None

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.response.get("ok"))


@dataclass(frozen=True)
class UploadedFile:
    """A file uploaded through the ``files_upload_v2`` steps."""

    id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None


@dataclass(frozen=True)
class _Page:
    """A body that is not Slack's JSON; ``taken``: the call was carried out first."""

    content_type: str
    text: str
    taken: bool = False


BAD_GATEWAY_PAGE = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"
)
"""The page a proxy (nginx) answers with when the server behind it fails."""


@dataclass
class _Injection:
    status: int
    body: JsonDict
    headers: dict[str, str]
    times: int
    channel: str | None = None
    page: _Page | None = None
    """Answered instead of ``body`` (not Slack's JSON)."""


@dataclass(frozen=True)
class _Window:
    methods: frozenset[str]
    until: float
    retry_after: float | None
    channel: str | None


_JSON_FIELDS = ("metadata", "blocks", "attachments", "files")
STREAM_TEXT_CHARS = 12_000
"""Characters of ``markdown_text`` one stream call takes (docs.slack.dev chat.startStream)."""

SLOW_METHODS = frozenset({"chat.postMessage", "chat.update"})
"""The methods ``post_delay`` slows down."""


class FakeSlackApi(LocalServer):
    """A local Slack Web API server; see the module docstring."""

    def __init__(
        self,
        *,
        team_id: str = TEAM_ID,
        team: str = TEAM_NAME,
        team_domain: str = TEAM_DOMAIN,
        bot_user_id: str = BOT_USER_ID,
        bot_id: str = BOT_ID,
        app_id: str = APP_ID,
        bot_name: str = BOT_NAME,
        enterprise_id: str | None = None,
        users: Mapping[str, str] | None = None,
        socket_url: str | None = None,
        ts_start: int = 1717171800,
        clock: Callable[[], float] = time.monotonic,
        file_token: str = "xoxb-test",
        post_delay: float = 0.0,
    ) -> None:
        self.team_id = team_id
        self.team = team
        self.team_domain = team_domain
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_id = app_id
        self.bot_name = bot_name
        self.enterprise_id = enterprise_id
        self.socket_url = socket_url
        self.calls: list[RecordedCall] = []
        self.ephemerals: list[JsonDict] = []
        self.files: dict[str, UploadedFile] = {}
        self.sessions: dict[tuple[str, str], JsonDict] = {}
        """Agent sessions by ``(channel, thread_ts)``: ``status``, ``title``,
        ``initiator_user_id`` (the last two as the call that created it gave them)."""
        self.session_warning: str | None = None
        """A warning every ``agents.sessions.setStatus`` answer carries, e.g.
        ``missing_agent_session_stopped_event_subscription`` (None: none)."""
        self.reactions: list[tuple[str, str, str]] = []
        """``(channel, ts, name)`` of every reaction added, in order."""
        self.streams: dict[str, JsonDict] = {}
        """Streamed messages by ts: ``channel``, ``thread_ts``, ``chunks`` (the
        ``markdown_text`` of each start, append and stop Slack took, in order) and
        ``state`` (``streaming``, ``stopped``, or ``expired``: Slack ended it)."""
        self.stream_expiry: int | None = None
        """Appends a stream takes before Slack ends it (None: never): the next append or
        stop answers ``message_not_in_streaming_state``."""
        self.plan_blocks = True
        """Whether ``plan`` blocks are taken (False: a workspace without them, where a
        ``chat.postMessage`` or ``chat.update`` holding one answers ``invalid_blocks``)."""
        self.users: dict[str, JsonDict] = {}
        self.groups: dict[str, list[str]] = {}
        """User groups (``S...`` id -> member user ids) for ``usergroups.users.list``."""
        for user_id, name in (HUMAN_USERS if users is None else users).items():
            self.add_user(user_id, name)
        self.add_user(bot_user_id, bot_name, is_bot=True)
        self._ts_start = ts_start
        self._ts_counter = itertools.count(1)
        self._file_counter = itertools.count(1)
        self._messages: dict[str, list[JsonDict]] = defaultdict(list)
        self._posted: dict[str, list[str]] = defaultdict(list)
        self._injections: dict[str, deque[_Injection]] = defaultdict(deque)
        self._windows: list[_Window] = []
        self.clock = clock
        """Seconds, for rate-limit windows; share it with the bot to scale time in a test."""
        self._root = ""
        self._shared = ServedFiles(authorization=f"Bearer {file_token}")
        self._shared_counter = itertools.count(1)
        self.post_delay = post_delay
        """Seconds every call of :data:`SLOW_METHODS` waits, once carried out, before its
        answer (0: none)."""
        self.installs = Installs()
        """Other workspaces and the OAuth flow (:mod:`tests.fakes.slack_installs`)."""

    # -- lifecycle ---------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The ``base_url`` for slack-sdk clients, ending in ``/api/``."""
        return f"{self.root_url}/api/"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        app.router.add_get("/files-pri/{tail:.*}", self._shared.handle)
        app.router.add_get("/oauth/v2/authorize", self.installs.authorize)
        app.router.add_route("*", "/{tail:.*}", _not_found)
        await self.listen(app)

    async def stop(self) -> None:
        await self.unlisten()

    # -- test controls -----------------------------------------------------------

    def add_workspace(self, team_id: str, *, channels: tuple[str, ...] = ()) -> FakeWorkspace:
        """Another workspace the app may be installed in, claiming ``channels``
        (:mod:`tests.fakes.slack_installs`)."""
        return self.installs.add(team_id, channels=channels)

    def consent(self, team_id: str) -> None:
        """The next visit of the consent page installs the app in ``team_id``."""
        self.installs.consenting = team_id

    def revoke(self, team_id: str) -> None:
        """Revoke the bot token of the added workspace ``team_id`` (an uninstall does)."""
        self.installs.workspaces[team_id].revoked = True

    def rate_limit(
        self, method: str, *, times: int = 1, retry_after: int = 30, channel: str | None = None
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with HTTP 429 ``ratelimited``.

        With ``channel``, only calls for that channel are refused (and count).
        """
        self._injections[method].append(
            _Injection(
                status=429,
                body={"ok": False, "error": "ratelimited"},
                headers={"Retry-After": str(retry_after)},
                times=times,
                channel=channel,
            )
        )

    def rate_limit_window(
        self,
        methods: str | Iterable[str],
        *,
        seconds: float,
        retry_after: float | None = None,
        channel: str | None = None,
    ) -> None:
        """Refuse every call of ``methods`` with 429 for ``seconds`` of :attr:`clock` from now.

        ``Retry-After`` is ``retry_after``, or the whole seconds left in the window.
        """
        names = frozenset([methods] if isinstance(methods, str) else methods)
        self._windows.append(_Window(names, self.clock() + seconds, retry_after, channel))

    def fail(
        self,
        method: str,
        error: str = "channel_not_found",
        *,
        times: int = 1,
        status: int = 200,
        channel: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with ``{"ok": false, "error": ...}``.

        Slack answers API errors with HTTP 200; pass ``status`` (e.g. 500) for others.
        """
        self._injections[method].append(
            _Injection(
                status=status,
                body={"ok": False, "error": error},
                headers={},
                times=times,
                channel=channel,
            )
        )

    def outage(
        self,
        method: str,
        *,
        status: int = 502,
        times: int = 1,
        page: str = BAD_GATEWAY_PAGE,
        content_type: str = "text/html",
        taken: bool = False,
        channel: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` as a proxy in front of a failing
        Slack does: HTTP ``status`` with ``page`` as ``content_type`` (an HTML page by
        default; ``text/plain``, or ``application/json`` for a body that only claims to
        be JSON). ``taken``: Slack carried the call out (a message is posted) and the
        page came instead of its answer. The call is recorded with ``response={}``;
        with ``channel``, only calls for that channel are answered so (and count)."""
        injection = _Injection(
            status=status,
            body={},
            headers={},
            times=times,
            channel=channel,
            page=_Page(content_type, page, taken),
        )
        self._injections[method].append(injection)

    def add_user(
        self,
        user_id: str,
        name: str,
        *,
        real_name: str | None = None,
        display_name: str | None = None,
        is_bot: bool = False,
    ) -> JsonDict:
        """Make ``users.info`` know a user; returns its ``user`` object."""
        real = real_name if real_name is not None else name.capitalize()
        display = display_name if display_name is not None else name
        user: JsonDict = {
            "id": user_id,
            "team_id": self.team_id,
            "name": name,
            "deleted": False,
            "real_name": real,
            "tz": "Europe/Paris",
            "tz_label": "Central European Summer Time",
            "tz_offset": 7200,
            "profile": {
                "real_name": real,
                "display_name": display,
                "real_name_normalized": real,
                "display_name_normalized": display,
                "team": self.team_id,
            },
            "is_admin": False,
            "is_owner": False,
            "is_bot": is_bot,
            "is_app_user": False,
            "updated": 1717171700,
        }
        if is_bot:
            user["profile"]["bot_id"] = self.bot_id
        self.users[user_id] = user
        return user

    def set_group(self, group_id: str, members: Iterable[str]) -> None:
        """Make the user group ``group_id`` have exactly ``members`` (user ids), from now on."""
        self.groups[group_id] = list(members)

    def add_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U0ALICE001",
        ts: str | None = None,
        thread_ts: str | None = None,
        **extra: Any,
    ) -> JsonDict:
        """Store a message someone else wrote (e.g. the mention that starts a thread)."""
        message: JsonDict = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": ts or self.next_ts(),
            "team": self.team_id,
            **extra,
        }
        if thread_ts is not None and thread_ts != message["ts"]:
            message["thread_ts"] = thread_ts
        self._store(channel, message)
        return copy.deepcopy(message)

    def share_file(
        self,
        name: str,
        content: bytes,
        *,
        mimetype: str = "application/octet-stream",
        user: str = "U0ALICE001",
        redirect_to: str | None = None,
        url: str | None = None,
    ) -> JsonDict:
        """A file ``user`` shared: Slack's file object, its URLs served here (bot token only).

        ``redirect_to``: its downloads answer 302 to that URL. ``url``: the object's
        ``url_private`` and ``url_private_download`` are that instead (a file on
        another host).
        """
        file_id = f"F0SHARE{next(self._shared_counter):03d}"
        base = f"/files-pri/{self.team_id}-{file_id}"
        private, download = f"{base}/{name}", f"{base}/download/{name}"
        for path in (private, download):
            self._shared.add(path, content, content_type=mimetype, redirect_to=redirect_to)
        kind = name.rsplit(".", 1)[-1].lower() if "." in name else "binary"
        return {
            "id": file_id,
            "created": self._ts_start,
            "timestamp": self._ts_start,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": kind,
            "pretty_type": kind.upper(),
            "user": user,
            "user_team": self.team_id,
            "editable": False,
            "size": len(content),
            "mode": "hosted",
            "is_external": False,
            "external_type": "",
            "is_public": True,
            "public_url_shared": False,
            "display_as_bot": False,
            "username": "",
            "url_private": url or self.root_url + quote(private),
            "url_private_download": url or self.root_url + quote(download),
            "permalink": f"https://{self.team_domain}.slack.com/files/{user}/{file_id}/{name}",
            "has_rich_preview": False,
            "file_access": "visible",
        }

    @property
    def downloads(self) -> list[FileRequest]:
        """Every request on the shared files' URLs, with its headers, in order."""
        return self._shared.requests

    def next_ts(self) -> str:
        """A fresh message ts, increasing: ``1717171800.000100``, ``1717171801.000200``..."""
        n = next(self._ts_counter)
        return f"{self._ts_start + n - 1}.{(n * 100) % 1_000_000:06d}"

    # -- what a person would see -------------------------------------------------

    def messages(self, channel: str) -> list[JsonDict]:
        """Every message of ``channel`` (any thread), oldest first."""
        return [copy.deepcopy(m) for m in sorted(self._messages[channel], key=_ts_key)]

    def thread(self, channel: str, thread_ts: str) -> list[JsonDict]:
        """The parent message (if known) and its replies, oldest first."""
        return [
            copy.deepcopy(m)
            for m in sorted(self._messages[channel], key=_ts_key)
            if m["ts"] == thread_ts or m.get("thread_ts") == thread_ts
        ]

    def message(self, channel: str, ts: str) -> JsonDict | None:
        """The message ``ts`` of ``channel`` as it is now (after updates), if any."""
        found = self._find(channel, ts)
        return copy.deepcopy(found) if found is not None else None

    def posted_texts(self, channel: str, thread_ts: str | None = None) -> list[str]:
        """Current texts of the messages posted through ``chat.postMessage``, in order.

        With ``thread_ts``, only those posted in that thread (or as its parent).
        """
        texts = []
        for ts in self._posted[channel]:
            message = self._find(channel, ts)
            if message is None:
                continue
            if thread_ts is None or thread_ts in (message["ts"], message.get("thread_ts")):
                texts.append(str(message.get("text", "")))
        return texts

    def calls_of(self, method: str) -> list[RecordedCall]:
        """The recorded calls of one method, in order."""
        return [call for call in self.calls if call.method == method]

    # -- HTTP --------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        arrived, seq = time.monotonic(), next_seq()
        method = request.match_info["method"]
        args = await _parse_args(request)
        headers = CIMultiDict(request.headers)
        status, body, extra_headers, page = self._answer(method, args, headers, args.get("token"))
        self.calls.append(
            RecordedCall(
                method=method,
                args=args,
                headers=headers,
                time=arrived,
                seq=seq,
                http_method=request.method,
                status=status,
                response=body,
                at=self.clock(),
            )
        )
        if self.post_delay > 0 and method in SLOW_METHODS:
            await asyncio.sleep(self.post_delay)  # carried out already: only the answer is late
        if page is not None:
            return web.Response(
                status=status,
                text=page.text,
                content_type=page.content_type,
                headers=extra_headers,
            )
        return web.json_response(body, status=status, headers=extra_headers)

    def _answer(
        self, method: str, args: JsonDict, headers: CIMultiDict[str], arg_token: Any
    ) -> tuple[int, JsonDict, dict[str, str], _Page | None]:
        """``(status, JSON body, headers, page)``: ``page`` is answered instead of the JSON
        body when set (:meth:`outage`)."""
        channel = str(args.get("channel") or args.get("channel_id") or "")
        refused = self._refusal(method, channel)
        if refused is not None:
            page = refused[3]
            if page is not None and page.taken:
                _HANDLERS[method](self, args)
            return refused
        if method == "oauth.v2.access":  # the app's client id and secret, not a token
            return 200, self.installs.oauth_v2_access(self, args, headers), {}, None
        handler = _HANDLERS.get(method)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}, None
        auth = headers.get("Authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else arg_token
        if not isinstance(token, str) or not token:
            return 200, {"ok": False, "error": "not_authed"}, {}, None
        is_app_token = token.startswith("xapp-")
        if method == "apps.connections.open" and not is_app_token:
            return 200, {"ok": False, "error": "not_allowed_token_type"}, {}, None
        if is_app_token and method not in ("apps.connections.open", "auth.test"):
            return 200, {"ok": False, "error": "not_allowed_token_type"}, {}, None
        other = self.installs.refusal(method, token, channel, self.team_id)
        if other is not None:
            return 200, other, {}, None
        with self.installs.acting_as(self, token):
            return 200, handler(self, args), {}, None

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        content = await request.read()
        known = self.files.get(file_id)
        if known is None:
            return web.Response(status=404, text="file not found", content_type="text/plain")
        self.files[file_id] = UploadedFile(
            id=file_id, filename=known.filename, length=len(content), content=content
        )
        # files.slack.com answers the upload with a short plain-text body.
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    def _refusal(
        self, method: str, channel: str
    ) -> tuple[int, JsonDict, dict[str, str], _Page | None] | None:
        """A window's 429, or the first injection for ``method`` that applies to ``channel``."""
        now = self.clock()
        self._windows = [w for w in self._windows if w.until > now]
        for window in self._windows:
            if method in window.methods and window.channel in (None, channel):
                wait = window.retry_after
                retry_after = math.ceil(window.until - now) if wait is None else wait
                headers = {"Retry-After": f"{retry_after:g}"}
                return 429, {"ok": False, "error": "ratelimited"}, headers, None
        queue = self._injections.get(method) or deque()
        for injection in queue:
            if injection.channel not in (None, channel):
                continue
            injection.times -= 1
            if injection.times <= 0:
                queue.remove(injection)
            body, headers = dict(injection.body), dict(injection.headers)
            return injection.status, body, headers, injection.page
        return None

    # -- state -------------------------------------------------------------------

    def _find(self, channel: str, ts: str) -> JsonDict | None:
        for message in self._messages[channel]:
            if message["ts"] == ts:
                return message
        return None

    def _store(self, channel: str, message: JsonDict) -> None:
        thread_ts = message.get("thread_ts")
        if thread_ts is not None and thread_ts != message["ts"]:
            parent = self._find(channel, thread_ts)
            if parent is not None:
                message.setdefault("parent_user_id", parent.get("user"))
                parent["thread_ts"] = thread_ts
                parent["reply_count"] = parent.get("reply_count", 0) + 1
                reply_users = parent.setdefault("reply_users", [])
                if message.get("user") not in reply_users:
                    reply_users.append(message.get("user"))
                parent["reply_users_count"] = len(reply_users)
                parent["latest_reply"] = message["ts"]
        self._messages[channel].append(message)

    def _bot_message(self, text: str, ts: str) -> JsonDict:
        return {
            "type": "message",
            "text": text,
            "user": self.bot_user_id,
            "ts": ts,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "team": self.team_id,
            "bot_profile": {
                "id": self.bot_id,
                "app_id": self.app_id,
                "user_id": self.bot_user_id,
                "name": self.bot_name,
                "deleted": False,
                "updated": 1717171700,
                "team_id": self.team_id,
                "icons": _ICONS,
            },
        }

    # -- methods -----------------------------------------------------------------

    def _auth_test(self, args: JsonDict) -> JsonDict:
        body: JsonDict = {
            "ok": True,
            "url": f"https://{self.team_domain}.slack.com/",
            "team": self.team,
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }
        if self.enterprise_id is not None:
            body["enterprise_id"] = self.enterprise_id
        return body

    def _bots_info(self, args: JsonDict) -> JsonDict:
        bot_id = args.get("bot")
        if bot_id == self.bot_id:
            app_id, user_id, name = self.app_id, self.bot_user_id, self.bot_name
        elif bot_id == OTHER_APP["bot_id"]:
            app_id, user_id, name = OTHER_APP["app_id"], OTHER_APP["user"], "other-app"
        else:
            return {"ok": False, "error": "bot_not_found"}
        return {
            "ok": True,
            "bot": {
                "id": bot_id,
                "deleted": False,
                "name": name,
                "updated": 1717171700,
                "app_id": app_id,
                "user_id": user_id,
                "icons": _ICONS,
            },
        }

    def _users_info(self, args: JsonDict) -> JsonDict:
        user = self.users.get(str(args.get("user", "")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": copy.deepcopy(user)}

    def _blocks_refusal(self, args: JsonDict) -> JsonDict | None:
        """``invalid_blocks`` for blocks Slack would refuse: a ``plan`` block where
        :attr:`plan_blocks` is off, a task card's status that is none of Slack's four,
        or two blocks with one ``block_id``
        (https://docs.slack.dev/reference/block-kit/blocks/task-card-block)."""
        blocks = args.get("blocks") if isinstance(args.get("blocks"), list) else []
        ids: list[str] = []
        errors: list[str] = []
        for n, block in enumerate(blocks):
            ids += [block["block_id"]] if "block_id" in block else []
            if block.get("type") != "plan":
                continue
            if not self.plan_blocks:
                errors.append(f"unsupported type: plan [json-pointer:/blocks/{n}/type]")
            for task in block.get("tasks") or []:
                ids += [task["block_id"]] if "block_id" in task else []
                if task.get("status") not in ("pending", "in_progress", "complete", "error"):
                    errors.append(f"invalid task status [json-pointer:/blocks/{n}]")
        if len(ids) != len(set(ids)):
            errors.append("duplicate block_id")
        if not errors:
            return None
        return {"ok": False, "error": "invalid_blocks", "errors": errors}

    def plan_states(self, channel: str, ts: str) -> list[tuple[float, tuple[str, ...]]]:
        """``(clock time, task statuses)`` of each accepted post or edit of message ``ts``
        that held a ``plan`` block, in order."""
        states: list[tuple[float, tuple[str, ...]]] = []
        for call in self.calls:
            if not call.ok or call.method not in ("chat.postMessage", "chat.update"):
                continue
            if call.args.get("channel") != channel:
                continue
            if (call.args.get("ts") or call.response.get("ts")) != ts:
                continue
            for block in call.args.get("blocks") or []:
                if block.get("type") == "plan":
                    statuses = tuple(str(t.get("status")) for t in block.get("tasks") or [])
                    states.append((call.at, statuses))
        return states

    def _chat_post_message(self, args: JsonDict) -> JsonDict:
        channel = args.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not (args.get("text") or args.get("blocks") or args.get("attachments")):
            return {"ok": False, "error": "no_text"}
        if (refused := self._blocks_refusal(args)) is not None:
            return refused
        ts = self.next_ts()
        message = self._bot_message(str(args.get("text") or ""), ts)
        for key in ("blocks", "attachments", "metadata"):
            if args.get(key):
                message[key] = copy.deepcopy(args[key])
        thread_ts = args.get("thread_ts")
        if thread_ts:
            message["thread_ts"] = str(thread_ts)
        self._store(str(channel), message)
        self._posted[str(channel)].append(ts)
        return {"ok": True, "channel": channel, "ts": ts, "message": copy.deepcopy(message)}

    def _chat_post_ephemeral(self, args: JsonDict) -> JsonDict:
        channel, user = args.get("channel"), args.get("user")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not user:
            return {"ok": False, "error": "user_not_found"}
        if not (args.get("text") or args.get("blocks") or args.get("attachments")):
            return {"ok": False, "error": "no_text"}
        ts = self.next_ts()
        ephemeral: JsonDict = {
            "channel": channel,
            "user": user,
            "text": args.get("text") or "",
            "ts": ts,
        }
        for key in ("blocks", "attachments", "thread_ts"):
            if args.get(key):
                ephemeral[key] = copy.deepcopy(args[key])
        self.ephemerals.append(ephemeral)
        return {"ok": True, "message_ts": ts}

    def _chat_update(self, args: JsonDict) -> JsonDict:
        channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        message = self._find(channel, ts)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.get("user") != self.bot_user_id:
            return {"ok": False, "error": "cant_update_message"}
        if (refused := self._blocks_refusal(args)) is not None:
            return refused
        if "text" in args:
            message["text"] = str(args["text"] or "")
        for key in ("blocks", "attachments", "metadata"):
            if key in args:
                message[key] = copy.deepcopy(args[key])
        message["edited"] = {"user": self.bot_user_id, "ts": self.next_ts()}
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": message.get("text", ""),
            "message": copy.deepcopy(message),
        }

    def _reactions_add(self, args: JsonDict) -> JsonDict:
        channel, ts = str(args.get("channel", "")), str(args.get("timestamp", ""))
        name = str(args.get("name", "")).strip(":")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not name:
            return {"ok": False, "error": "invalid_name"}
        if (channel, ts, name) in self.reactions:
            return {"ok": False, "error": "already_reacted"}
        self.reactions.append((channel, ts, name))
        message = self._find(channel, ts)
        if message is not None:
            reactions = message.setdefault("reactions", [])
            for reaction in reactions:
                if reaction["name"] == name:
                    reaction["users"].append(self.bot_user_id)
                    reaction["count"] += 1
                    break
            else:
                reactions.append({"name": name, "users": [self.bot_user_id], "count": 1})
        return {"ok": True}

    def _conversations_replies(self, args: JsonDict) -> JsonDict:
        channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        messages = self.thread(channel, ts)
        if not messages:
            return {"ok": False, "error": "thread_not_found"}
        return {
            "ok": True,
            "messages": messages,
            "has_more": False,
            "response_metadata": {"next_cursor": ""},
        }

    def _files_get_upload_url_external(self, args: JsonDict) -> JsonDict:
        filename, length = args.get("filename"), args.get("length")
        if not filename or length is None:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F0UPLOAD{next(self._file_counter):03d}"
        self.files[file_id] = UploadedFile(id=file_id, filename=str(filename), length=int(length))
        return {
            "ok": True,
            "upload_url": f"{self.root_url}/upload/v1/{file_id}",
            "file_id": file_id,
        }

    def _files_complete_upload_external(self, args: JsonDict) -> JsonDict:
        entries = args.get("files")
        if not isinstance(entries, list) or not entries:
            return {"ok": False, "error": "invalid_arguments"}
        channel = args.get("channel_id") or args.get("channels")
        thread_ts = args.get("thread_ts")
        comment = args.get("initial_comment")
        shown: list[JsonDict] = []
        for entry in entries:
            uploaded = self.files.get(str(entry.get("id")))
            if uploaded is None or uploaded.content is None:
                return {"ok": False, "error": "file_not_found"}
            title = entry.get("title") or uploaded.filename
            uploaded = UploadedFile(
                id=uploaded.id,
                filename=uploaded.filename,
                length=uploaded.length,
                content=uploaded.content,
                title=title,
                channel=str(channel) if channel else None,
                thread_ts=str(thread_ts) if thread_ts else None,
                initial_comment=str(comment) if comment else None,
            )
            self.files[uploaded.id] = uploaded
            shown.append(
                {
                    "id": uploaded.id,
                    "created": 1717171800,
                    "timestamp": 1717171800,
                    "name": uploaded.filename,
                    "title": title,
                    "user": self.bot_user_id,
                    "size": len(uploaded.content or b""),
                    "is_external": False,
                    "url_private": f"{self.root_url}/files/{uploaded.id}/{uploaded.filename}",
                }
            )
        if channel:
            for one in str(channel).split(","):
                message = self._bot_message(str(comment or ""), self.next_ts())
                message["files"] = copy.deepcopy(shown)
                message["upload"] = True
                if thread_ts:
                    message["thread_ts"] = str(thread_ts)
                self._store(one, message)
        return {"ok": True, "files": [{"id": f["id"], "title": f["title"]} for f in shown]}

    def _usergroups_users_list(self, args: JsonDict) -> JsonDict:
        """https://docs.slack.dev/reference/methods/usergroups.users.list"""
        members = self.groups.get(str(args.get("usergroup", "")))
        if members is None:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(members)}

    def _agents_sessions_set_status(self, args: JsonDict) -> JsonDict:
        """Create or update the session of ``(channel_id, thread_ts)``; ``title`` and
        ``initiator_user_id`` count only on creation. With :attr:`session_warning`, the
        answer carries it as ``warning`` and in ``response_metadata.warnings``."""
        channel, thread = str(args.get("channel_id") or ""), str(args.get("thread_ts") or "")
        status = args.get("status")
        if not channel or status not in ("active", "processing", "suspended", "closed"):
            return {"ok": False, "error": "invalid_arguments"}
        session = self.sessions.get((channel, thread))
        if session is None:
            session = {
                "title": args.get("title"),
                "initiator_user_id": args.get("initiator_user_id"),
            }
            self.sessions[(channel, thread)] = session
        session["status"] = status
        answer: JsonDict = {"ok": True, "status": status, "title": session["title"]}
        if self.session_warning:
            answer["warning"] = self.session_warning
            answer["response_metadata"] = {"warnings": [self.session_warning]}
        return answer

    def session_statuses(self, channel: str, thread_ts: str) -> list[str]:
        """The statuses ``agents.sessions.setStatus`` set on one thread's session, in
        order, refused calls left out."""
        return [
            str(call.args.get("status"))
            for call in self.calls_of("agents.sessions.setStatus")
            if call.ok
            and call.args.get("channel_id") == channel
            and call.args.get("thread_ts") == thread_ts
        ]

    def _chat_start_stream(self, args: JsonDict) -> JsonDict:
        """https://docs.slack.dev/reference/methods/chat.startStream: a reply in
        ``thread_ts``, for ``recipient_user_id`` of ``recipient_team_id`` (both required
        in a channel), its first ``markdown_text`` (at most 12,000 characters)."""
        channel, thread = str(args.get("channel") or ""), str(args.get("thread_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread:
            return {"ok": False, "error": "invalid_arguments"}
        if channel.startswith("C") and not (
            args.get("recipient_user_id") and args.get("recipient_team_id")
        ):
            return {"ok": False, "error": "invalid_arguments"}
        text = str(args.get("markdown_text") or "")
        if len(text) > STREAM_TEXT_CHARS:
            return {"ok": False, "error": "msg_too_long"}
        ts = self.next_ts()
        message = self._bot_message(text, ts)
        message["thread_ts"] = thread
        self._store(channel, message)
        self._posted[channel].append(ts)
        self.streams[ts] = {
            "channel": channel,
            "thread_ts": thread,
            "chunks": [text] if text else [],
            "state": "streaming",
            "appends": 0,
        }
        return {"ok": True, "channel": channel, "ts": ts}

    def _streaming(self, args: JsonDict) -> tuple[JsonDict, JsonDict] | JsonDict:
        """The stream and its message that ``args`` name, or Slack's refusal."""
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        stream = self.streams.get(ts)
        message = self._find(channel, ts)
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if stream is None or message is None or stream["channel"] != channel:
            return {"ok": False, "error": "message_not_found"}
        if stream["state"] != "streaming":
            return {"ok": False, "error": "message_not_in_streaming_state"}
        text = str(args.get("markdown_text") or "")
        if len(text) > STREAM_TEXT_CHARS:
            return {"ok": False, "error": "msg_too_long"}
        return stream, message

    def _chat_append_stream(self, args: JsonDict) -> JsonDict:
        """https://docs.slack.dev/reference/methods/chat.appendStream (see
        :attr:`stream_expiry` for an expiry)."""
        found = self._streaming(args)
        if isinstance(found, dict):
            return found
        stream, message = found
        if self.stream_expiry is not None and stream["appends"] >= self.stream_expiry:
            stream["state"] = "expired"
            return {"ok": False, "error": "message_not_in_streaming_state"}
        text = str(args.get("markdown_text") or "")
        stream["appends"] += 1
        stream["chunks"].append(text)
        message["text"] = str(message.get("text", "")) + text
        return {"ok": True, "channel": stream["channel"], "ts": message["ts"]}

    def _chat_stop_stream(self, args: JsonDict) -> JsonDict:
        """https://docs.slack.dev/reference/methods/chat.stopStream: its last
        ``markdown_text``, ``blocks`` at the bottom, ``metadata``; the stream ends."""
        found = self._streaming(args)
        if isinstance(found, dict):
            return found
        stream, message = found
        if self.stream_expiry is not None and stream["appends"] > self.stream_expiry:
            stream["state"] = "expired"
            return {"ok": False, "error": "message_not_in_streaming_state"}
        text = str(args.get("markdown_text") or "")
        if text:
            stream["chunks"].append(text)
            message["text"] = str(message.get("text", "")) + text
        for key in ("blocks", "metadata"):
            if args.get(key):
                message[key] = copy.deepcopy(args[key])
        stream["state"] = "stopped"
        return {"ok": True, "channel": stream["channel"], "ts": message["ts"]}

    def expire_streams(self) -> None:
        """Slack ends every open stream now (a long run): the next append or stop of
        each answers ``message_not_in_streaming_state``."""
        for stream in self.streams.values():
            if stream["state"] == "streaming":
                stream["state"] = "expired"

    def _apps_connections_open(self, args: JsonDict) -> JsonDict:
        if not self.socket_url:
            return {"ok": False, "error": "socket_url_not_set_in_fake"}
        return {"ok": True, "url": self.socket_url}


_ICONS = {
    "image_36": "https://a.slack-edge.com/80588/img/plugins/app/bot_36.png",
    "image_48": "https://a.slack-edge.com/80588/img/plugins/app/bot_48.png",
    "image_72": "https://a.slack-edge.com/80588/img/plugins/app/service_72.png",
}

_HANDLERS = {
    "auth.test": FakeSlackApi._auth_test,
    "bots.info": FakeSlackApi._bots_info,
    "users.info": FakeSlackApi._users_info,
    "chat.postMessage": FakeSlackApi._chat_post_message,
    "chat.postEphemeral": FakeSlackApi._chat_post_ephemeral,
    "chat.update": FakeSlackApi._chat_update,
    "reactions.add": FakeSlackApi._reactions_add,
    "conversations.replies": FakeSlackApi._conversations_replies,
    "files.getUploadURLExternal": FakeSlackApi._files_get_upload_url_external,
    "files.completeUploadExternal": FakeSlackApi._files_complete_upload_external,
    "apps.connections.open": FakeSlackApi._apps_connections_open,
    "usergroups.users.list": FakeSlackApi._usergroups_users_list,
    "agents.sessions.setStatus": FakeSlackApi._agents_sessions_set_status,
    "chat.startStream": FakeSlackApi._chat_start_stream,
    "chat.appendStream": FakeSlackApi._chat_append_stream,
    "chat.stopStream": FakeSlackApi._chat_stop_stream,
}


async def _parse_args(request: web.Request) -> JsonDict:
    args: JsonDict = dict(request.query)
    if request.content_type == "application/json":
        raw = await request.text()
        if raw.strip():
            body = json.loads(raw)
            if isinstance(body, dict):
                args.update(body)
    elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        for key, field_value in form.items():
            if isinstance(field_value, str):
                args[key] = field_value
            elif isinstance(field_value, FileField):
                args[key] = field_value.filename  # legacy multipart upload: the name only
            else:
                args[key] = bytes(field_value)
    for key in _JSON_FIELDS:
        value = args.get(key)
        if isinstance(value, str) and value[:1] in ("{", "["):
            try:
                args[key] = json.loads(value)
            except json.JSONDecodeError:
                pass
    return args


async def _not_found(request: web.Request) -> web.StreamResponse:
    # urljoin drops the last path segment of a base_url without a trailing slash.
    hint = f"no such path {request.path!r}: is the client's base_url api.base_url (.../api/)?"
    return web.json_response({"ok": False, "error": "not_found", "hint": hint}, status=404)


def _ts_key(message: Mapping[str, Any]) -> tuple[int, int]:
    seconds, _, micros = str(message["ts"]).partition(".")
    return int(seconds), int(micros or 0)
