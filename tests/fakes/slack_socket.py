"""A local Slack Socket Mode server, for running slack-sdk's aiohttp ``SocketModeClient``
(and bolt's ``AsyncSocketModeHandler``) in tests.

It plays the protocol of https://docs.slack.dev/apis/events-api/using-socket-mode/ the
way ``slack_sdk.socket_mode.aiohttp.SocketModeClient`` expects it:

* the client asks ``apps.connections.open`` (the :class:`FakeSlackApi`) for a URL, so
  wire them: ``FakeSlackApi(socket_url=server.url)`` or ``api.socket_url = server.url``;
* on connect the server speaks first: ``{"type": "hello", "num_connections",
  "debug_info", "connection_info": {"app_id"}}``;
* ``await server.send_envelope(type, payload, ...)`` sends ``{"envelope_id", "type",
  "payload", "accepts_response_payload", "retry_attempt", "retry_reason"}`` to one open
  connection and returns the envelope id; ``await server.ack(envelope_id)`` waits for
  the client's ``{"envelope_id", "payload"?}`` and returns it;
* which connection: ``connection=N`` (the N-th made, counting from 1) picks one;
  otherwise ``spread`` does: ``"newest"`` (the default: one client, reconnecting) or
  ``"round_robin"`` (each envelope to the next open connection in turn, oldest
  first). Slack lets an app hold up to 10 Socket Mode connections at once and sends
  each envelope to one of them, not to each
  (https://docs.slack.dev/apis/events-api/using-socket-mode/; the limit of 10 is also
  in https://api.slack.com/apis/event-delivery), so several processes with one app
  token share the events; round robin is one such spread, repeatable in a test (the
  fake does not refuse an 11th connection);
* ``await server.send_text(raw)`` sends any text frame as given (not JSON, an envelope
  with no id, a payload of the wrong type ...), to see the client skip what it cannot
  read; it is logged as ``send`` with no envelope id;
* ``await server.send_disconnect(reason)`` asks the client to reconnect (it calls
  ``apps.connections.open`` again);
* the client's pings are answered (aiohttp autoping); a client closing is logged.

``server.log`` records, in order, ``connect`` / ``hello`` / ``send`` / ``ack`` /
``message`` / ``disconnect`` (the server asked) / ``closed`` (a connection ended) as
:class:`LogEntry`, each with the number of its connection; ``seq`` comes from the
counter shared with ``FakeSlackApi.calls``, so ``entry.seq < call.seq`` means the ack
arrived before that Web API call. ``server.sent_on(envelope_id)`` and
``server.acked_on(envelope_id)`` read from it the connections an envelope went to and
the ones that acked it (one number per ack frame: an envelope acked twice shows
twice); ``server.connected`` lists the open connections' numbers and
``await server.wait_connections(n)`` waits until ``n`` are open.

Usage::

    async with FakeSocketModeServer() as server, FakeSlackApi(socket_url=server.url) as api:
        client = SocketModeClient(app_token="xapp-test",
                                  web_client=AsyncWebClient(base_url=api.base_url))
        client.socket_mode_request_listeners.append(on_request)
        await client.connect()
        envelope_id = await server.send_envelope("events_api", event_body)
        assert (await server.ack(envelope_id))["envelope_id"] == envelope_id
        await client.close()
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import WSCloseCode, WSMsgType, web

from .local import LocalServer
from .slack_api import APP_ID, next_seq

EnvelopeType = Literal["events_api", "interactive", "slash_commands"]
LogKind = Literal["connect", "hello", "send", "ack", "message", "disconnect", "closed"]
Spread = Literal["newest", "round_robin"]
"""Which open connection an envelope goes to when the sender names none (see the module
docstring)."""


@dataclass(frozen=True)
class LogEntry:
    """One thing that happened on the socket; ``data`` is the JSON frame, if any."""

    kind: LogKind
    seq: int
    time: float
    connection: int
    envelope_id: str | None = None
    data: Mapping[str, Any] | None = None


class FakeSocketModeServer(LocalServer):
    """A local Socket Mode websocket server; see the module docstring."""

    def __init__(
        self,
        *,
        app_id: str = APP_ID,
        host_name: str = "applink-fake-1",
        spread: Spread = "newest",
    ) -> None:
        self.app_id = app_id
        self.host_name = host_name
        self.spread: Spread = spread
        self.log: list[LogEntry] = []
        self.acks: dict[str, dict[str, Any]] = {}
        """The first ack received for each envelope id."""
        self.messages: list[Any] = []
        """Frames from the client that were not acks (or not JSON)."""
        self.connections_made = 0
        self._open: dict[int, web.WebSocketResponse] = {}
        self._turn = 0
        self._ack_waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._connected = asyncio.Event()
        self._root = ""
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------

    @property
    def url(self) -> str:
        """The ``ws://`` URL for ``apps.connections.open`` to hand out."""
        return f"{self.root_url}/link/?ticket=fake-ticket&app_id={self.app_id}"

    @property
    def open_connections(self) -> int:
        """How many connections are open now."""
        return len(self._open)

    @property
    def connected(self) -> list[int]:
        """The numbers of the open connections (the N-th made is N), oldest first."""
        return sorted(n for n, ws in self._open.items() if not ws.closed)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/link/", self._link)
        await self.listen(app, scheme="ws")

    async def stop(self) -> None:
        self._stopping = True  # a client told to go away must not get back in
        await self.close_connections()
        await self.unlisten()
        for waiter in self._ack_waiters.values():
            if not waiter.done():
                waiter.cancel()

    # -- driving the client ------------------------------------------------------

    async def wait_connected(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Wait until a client is connected (and has been sent its ``hello``)."""
        await asyncio.wait_for(self._connected.wait(), timeout)

    async def wait_connections(self, count: int, timeout: float = 5.0) -> list[int]:  # noqa: ASYNC109
        """Wait until at least ``count`` connections are open (each sent its ``hello``);
        their numbers (:attr:`connected`). Raises ``TimeoutError`` after ``timeout`` s."""
        async with asyncio.timeout(timeout):
            while len(self.connected) < count:  # noqa: ASYNC110 (clients connect on their own)
                await asyncio.sleep(0.01)
        return self.connected

    async def send_envelope(
        self,
        type: EnvelopeType,
        payload: Mapping[str, Any],
        *,
        retry_attempt: int = 0,
        retry_reason: str = "",
        accepts_response_payload: bool = False,
        envelope_id: str | None = None,
        connection: int | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> str:
        """Send one envelope to ``connection`` (None: the one :attr:`spread` picks);
        returns its envelope id. Waits up to ``timeout`` s for a connection to be open;
        a named one that is not open raises ``LookupError``."""
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id or str(uuid.uuid4()),
            "type": type,
            "payload": dict(payload),
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        return await self.send_raw_envelope(envelope, connection=connection, timeout=timeout)

    async def send_raw_envelope(
        self,
        envelope: Mapping[str, Any],
        *,
        connection: int | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> str:
        """Send a whole envelope as given (e.g. a fixture's ``payload``) to
        ``connection`` (as :meth:`send_envelope`); returns its id."""
        envelope_id = str(envelope["envelope_id"])
        self._ack_waiters.setdefault(envelope_id, asyncio.get_running_loop().create_future())
        number, ws = await self._pick(connection, timeout)
        self._record("send", number, envelope_id, dict(envelope))
        await ws.send_str(json.dumps(envelope))
        return envelope_id

    async def send_text(
        self,
        raw: str,
        *,
        connection: int | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> None:
        """Send ``raw`` as one text frame to ``connection`` (as :meth:`send_envelope`),
        whatever it holds.

        Logged as ``send`` with no envelope id; ``data`` is the frame when it is a
        JSON object. If it holds an ``envelope_id``, :meth:`ack` can wait for it.
        """
        try:
            frame = json.loads(raw)
        except json.JSONDecodeError:
            frame = None
        frame = frame if isinstance(frame, dict) else None
        envelope_id = frame.get("envelope_id") if frame is not None else None
        if isinstance(envelope_id, str):
            self._ack_waiters.setdefault(envelope_id, asyncio.get_running_loop().create_future())
        number, ws = await self._pick(connection, timeout)
        self._record("send", number, None, frame)
        await ws.send_str(raw)

    async def ack(self, envelope_id: str, timeout: float = 5.0) -> dict[str, Any]:  # noqa: ASYNC109
        """Wait for the client's ack of ``envelope_id`` and return it."""
        waiter = self._ack_waiters.get(envelope_id)
        if waiter is None:
            raise KeyError(f"no envelope {envelope_id!r} was sent")
        return await asyncio.wait_for(asyncio.shield(waiter), timeout)

    async def send_disconnect(
        self,
        reason: str = "refresh_requested",
        *,
        connection: int | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> None:
        """Send ``{"type": "disconnect", "reason": ...}`` to ``connection`` (None: the
        newest): its client opens a new connection."""
        frame = {"type": "disconnect", "reason": reason, "debug_info": {"host": self.host_name}}
        number, ws = await self._pick(connection, timeout, spread="newest")
        self._record("disconnect", number, None, frame)
        await ws.send_str(json.dumps(frame))

    async def close_connections(self, code: int = WSCloseCode.GOING_AWAY) -> None:
        """Close every open connection from the server side."""
        for ws in list(self._open.values()):
            await ws.close(code=code, message=b"server closing")

    def index(self, kind: LogKind, envelope_id: str | None = None) -> int:
        """Position in ``log`` of the first entry of ``kind`` (for ``envelope_id``)."""
        for i, entry in enumerate(self.log):
            if entry.kind == kind and (envelope_id is None or entry.envelope_id == envelope_id):
                return i
        raise LookupError(f"no {kind} entry for {envelope_id!r}")

    def entry(self, kind: LogKind, envelope_id: str | None = None) -> LogEntry:
        """The first log entry of ``kind`` (for ``envelope_id``)."""
        return self.log[self.index(kind, envelope_id)]

    def sent_on(self, envelope_id: str) -> list[int]:
        """The connections ``envelope_id`` was sent to, in order (one per ``send``)."""
        return [e.connection for e in self.log if e.kind == "send" and e.envelope_id == envelope_id]

    def acked_on(self, envelope_id: str) -> list[int]:
        """The connections an ack of ``envelope_id`` came from, one per ack received."""
        return [e.connection for e in self.log if e.kind == "ack" and e.envelope_id == envelope_id]

    def envelopes(self) -> list[str]:
        """The ids of the envelopes sent, each once, in the order first sent."""
        sent = (e.envelope_id for e in self.log if e.kind == "send" and e.envelope_id)
        return list(dict.fromkeys(sent))

    # -- websocket ---------------------------------------------------------------

    async def _pick(
        self, connection: int | None, wait: float, *, spread: Spread | None = None
    ) -> tuple[int, web.WebSocketResponse]:
        """The connection to send to: ``connection``, else the one ``spread`` (by default
        :attr:`spread`) picks among the open ones, waiting up to ``wait`` s for one."""
        if connection is not None:
            ws = self._open.get(connection)
            if ws is None or ws.closed:
                raise LookupError(f"Socket Mode connection {connection} is not open")
            return connection, ws
        deadline = time.monotonic() + wait
        while not (live := self.connected):
            if time.monotonic() >= deadline:
                raise TimeoutError("no Socket Mode client is connected")
            await asyncio.sleep(0.01)
        if (spread or self.spread) == "newest":
            number = live[-1]
        else:
            number = live[self._turn % len(live)]
            self._turn += 1
        return number, self._open[number]

    def _record(
        self,
        kind: LogKind,
        connection: int,
        envelope_id: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        self.log.append(
            LogEntry(
                kind=kind,
                seq=next_seq(),
                time=time.monotonic(),
                connection=connection,
                envelope_id=envelope_id,
                data=data,
            )
        )

    async def _link(self, request: web.Request) -> web.StreamResponse:
        if self._stopping:
            raise web.HTTPServiceUnavailable()
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections_made += 1
        number = self.connections_made
        self._record("connect", number)
        hello = {
            "type": "hello",
            "num_connections": len(self._open) + 1,
            "debug_info": {
                "host": self.host_name,
                "build_number": 1,
                "approximate_connection_time": 18060,
            },
            "connection_info": {"app_id": self.app_id},
        }
        try:
            await ws.send_str(json.dumps(hello))
            self._record("hello", number, None, hello)
            self._open[number] = ws
            self._connected.set()
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._received(number, message.data)
                elif message.type == WSMsgType.BINARY:
                    self.messages.append(message.data)
                    self._record("message", number)
        except ConnectionError:
            pass
        finally:
            self._open.pop(number, None)
            if not self._open:
                self._connected.clear()
            self._record("closed", number)
        return ws

    def _received(self, connection: int, raw: str) -> None:
        try:
            frame = json.loads(raw)
        except json.JSONDecodeError:
            frame = None
        if isinstance(frame, dict) and "envelope_id" in frame:
            envelope_id = str(frame["envelope_id"])
            self._record("ack", connection, envelope_id, frame)
            self.acks.setdefault(envelope_id, frame)
            waiter = self._ack_waiters.setdefault(
                envelope_id, asyncio.get_running_loop().create_future()
            )
            if not waiter.done():
                waiter.set_result(frame)
            return
        self.messages.append(frame if frame is not None else raw)
        self._record("message", connection, None, frame if isinstance(frame, dict) else None)
