"""Real ``threadbot run`` processes on Slack or Discord, for shutdown, takeover,
several-instance and sharding tests.

:class:`BotProcess` starts ``python -m bot run`` with the Slack adapter pointed at a
:class:`tests.fakes.slack_api.FakeSlackApi` (in HTTP mode, or in Socket Mode through
the :class:`tests.fakes.slack_socket.FakeSocketModeServer` the API fake hands out), or
the Discord adapter at a :class:`tests.fakes.discord_api.FakeDiscord`, and the real
``anthropic`` client at a
:class:`tests.fakes.anthropic_server.FakeAnthropicServer`, on a SQLite file that
several processes may share (or on a PostgreSQL database, by its URL), and reads
the store (:meth:`BotProcess.query`: ``sqlite3``, or asyncpg on PostgreSQL).
:class:`Channel` speaks as people do in Slack (events built from the fixtures, as
:class:`tests.slack_harness.Workspace` does in-process) to one such process or to
anything with a ``port`` that passes Slack's requests on (:class:`Listening`: signed
event POSTs), or through the Socket Mode fake (:class:`SocketMode`: envelopes, acked).
Tests wait on conditions (:func:`eventually`), never on fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

from tests import forkserver
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, sign
from tests.fakes.slack_socket import FakeSocketModeServer
from tests.slack_harness import ALICE, CHANNEL, SECRET, event_body, fixture

ROOT = Path(__file__).resolve().parents[1]
WAIT = 120.0
"""Seconds a test waits for what another process does (it goes on as soon as it happens;
the limit holds on a machine ten times slower)."""


def sleep_marker(whole: int = 60) -> str:
    """Seconds for ``sleep`` (``whole`` and a random fraction) that no other test's
    process, nor another run's beside this one, has on its command line."""
    return f"{whole}.{secrets.randbelow(10**9):09d}"


def live_with(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker`` (any PID namespace)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker in (entry / "cmdline").read_text():
                if "Z" not in (entry / "stat").read_text().rpartition(")")[2][:3]:
                    found.append(int(entry.name))
    return found


def free_port() -> int:
    """A TCP port nothing listens on now (the bot binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def eventually(condition: Callable[[], object], *, seconds: float = WAIT) -> None:
    """Poll ``condition`` every 50 ms until truthy; fail after ``seconds``."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 (the condition reads another process's state)
            await asyncio.sleep(0.05)


class Listening(Protocol):
    """Something Slack's requests may be POSTed to on ``127.0.0.1:port`` (a bot process,
    or a proxy in front of several)."""

    @property
    def port(self) -> int: ...


@dataclass(frozen=True)
class SocketMode:
    """Slack's side of Socket Mode as a place to deliver to: each event goes through
    ``server`` as an ``events_api`` envelope to ``connection`` (None: the one the
    server's ``spread`` picks), and is delivered once that connection's client acked it.

    ``again``: a connection the event is also sent to at the same time, as Slack's
    retry of it (``retry_attempt`` one more, ``retry_reason`` ``timeout``: Slack
    retries an envelope whose ack came late, and may send the retry to another of the
    app's connections); delivered once both acked."""

    server: FakeSocketModeServer
    connection: int | None = None
    again: int | None = None


Target = Listening | SocketMode
"""Where :class:`Channel` delivers: a process or proxy over HTTP, or Socket Mode."""


def _placeholders(statement: str) -> str:
    """``statement`` with its ``?`` parameters numbered as PostgreSQL's ``$1``, ``$2``..."""
    parts = statement.split("?")
    return "".join(part + (f"${n}" if n < len(parts) else "") for n, part in enumerate(parts, 1))


async def _postgres_rows(dsn: str, statement: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    import asyncpg

    connection = await asyncpg.connect(dsn)
    try:
        return [tuple(row) for row in await connection.fetch(statement, *args)]
    finally:
        await connection.close()


class BotProcess:
    """One ``threadbot run`` process; its stderr is collected while it runs.

    ``api``: the platform it connects to, Slack in HTTP mode on a port of its own, or
    Discord (its gateway and REST API). Its operations address takes a free port
    (``THREADBOT_OPS_PORT=0``), so processes never clash on one.
    ``database_url``: the store's SQLAlchemy URL (``postgresql+asyncpg://...``, or a
    SQLite one); by default the SQLite file ``tmp_path/threadbot.db``, which every
    process made with the same ``tmp_path`` shares, as they share the workspaces.
    ``instance``: its lease owner name (``THREADBOT_INSTANCE``; empty: ``host:pid``).
    ``socket_mode``: receive over Socket Mode (``SLACK_APP_TOKEN`` set, no signing
    secret) at the URL ``api`` hands out (``FakeSlackApi(socket_url=...)``; ValueError
    without one) instead of HTTP on ``port``.
    ``settings``: more ``THREADBOT_*`` variables (``lease_ttl="2"``...). The operations
    address takes any free port (``THREADBOT_OPS_PORT=0``) unless ``ops_port`` is given.
    ``launcher``: the module run as ``python -m LAUNCHER run`` (``bot``; a test's own,
    such as :mod:`tests.clocked_bot`); ``environ``: more variables, not settings.
    ``said``: what it printed on stdout before it was connected.
    """

    def __init__(
        self,
        tmp_path: Path,
        api: FakeSlackApi | FakeDiscord,
        model_url: str,
        *,
        database_url: str | None = None,
        instance: str | None = None,
        socket_mode: bool = False,
        launcher: str = "bot",
        environ: Mapping[str, str] | None = None,
        **settings: str,
    ) -> None:
        self.dir = tmp_path
        self.launcher = launcher
        self.db = tmp_path / "threadbot.db"
        self.database_url = database_url or f"sqlite+aiosqlite:///{self.db}"
        if instance is not None:
            settings["instance"] = instance
        self.port = free_port()
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))
        }
        given: dict[str, str]
        if isinstance(api, FakeDiscord):
            self.platform = "discord"
            given = {
                "DISCORD_TOKEN": api.token or "test-discord-token",
                "DISCORD_API_URL": api.api_url,
                "DISCORD_GATEWAY_URL": api.gateway_url,
            }
        else:
            self.platform = "slack"
            given = {
                "SLACK_BOT_TOKEN": "xoxb-test",
                "SLACK_SIGNING_SECRET": SECRET,
                "SLACK_API_URL": api.base_url,
                "THREADBOT_SLACK_HOST": "127.0.0.1",
                "THREADBOT_SLACK_PORT": str(self.port),
            }
        given |= {
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": model_url,
            "THREADBOT_DATABASE_URL": self.database_url,
            "THREADBOT_WORKSPACE_ROOT": str(tmp_path / "workspaces"),
            "THREADBOT_LOG_LEVEL": "WARNING",
            "THREADBOT_RUNNING_NOTE_EVERY": "0",  # threads as the tests write them, however slow
            "THREADBOT_OPS_PORT": "0",  # processes beside each other, and beside other tests
        }
        if socket_mode:
            if not isinstance(api, FakeSlackApi) or not api.socket_url:
                raise ValueError("Socket Mode needs FakeSlackApi(socket_url=...)")
            del given["SLACK_SIGNING_SECRET"]
            given["SLACK_APP_TOKEN"] = "xapp-test"
        self.settings = given | {f"THREADBOT_{k.upper()}": v for k, v in settings.items()}
        """The variables this process is given (its settings, secrets and the fakes' URLs),
        apart from the environment it inherits."""
        self.env = env | {"PYTHONPATH": str(ROOT)} | dict(environ or {}) | self.settings
        self.proc: forkserver.Process | None = None
        self.said: list[str] = []
        self.stderr: list[str] = []
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the process and wait until it says it is connected to its platform (the
        lines before it, such as its operations address, are kept in :attr:`said`)."""
        self.proc = await forkserver.create_subprocess_exec(
            sys.executable,
            "-m",
            self.launcher,
            "run",
            cwd=self.dir,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self._reader = asyncio.create_task(self._read_stderr())
        async with asyncio.timeout(WAIT):
            while (line := (await self.proc.stdout.readline()).decode()) and not _connected(
                line, self.platform
            ):
                self.said.append(line)
        assert _connected(line, self.platform), f"said {self.said}; logged:\n{self.log}"

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    @property
    def log(self) -> str:
        """What the process wrote to stderr so far."""
        return "".join(self.stderr)

    def signal(self, signum: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    async def wait(self, seconds: float = WAIT) -> int:
        """Wait for the process to exit; its exit code."""
        assert self.proc is not None
        code = await asyncio.wait_for(self.proc.wait(), seconds)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, seconds)
        return code

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            self._reader.cancel()

    @property
    def ops_url(self) -> str:
        """The operations address the process said it listens on (``http://host:port``)."""
        return ops_url(self.said)

    @property
    def on_postgres(self) -> bool:
        """Whether the process's store is a PostgreSQL database."""
        return make_url(self.database_url).get_backend_name() == "postgresql"

    def query(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of ``statement`` (``?`` for each of ``args``) on the process's database,
        each a tuple; a write is committed at once.

        SQLite is read with ``sqlite3`` (times come back as strings). PostgreSQL is
        read with asyncpg (the store's own driver; SQLAlchemy has no synchronous
        engine over it), on a connection of its own, in a thread of its own
        (:func:`tests.postgres.run`), so a test calls it the same way from a running
        event loop; ``?`` becomes ``$1``, ``$2``... and times come back as ``datetime``.
        """
        if not self.on_postgres:
            with contextlib.closing(sqlite3.connect(self.db)) as db, db:
                return db.execute(statement, args).fetchall()
        from tests.postgres import run

        dsn = make_url(self.database_url).set(drivername="postgresql")
        rendered = dsn.render_as_string(hide_password=False)
        return run(_postgres_rows(rendered, _placeholders(statement), args))


def _connected(line: str, platform: str) -> bool:
    """Whether ``line`` says ``threadbot: connected to <platform>``, as text or as a JSON
    log line (``THREADBOT_LOG_FORMAT=json``)."""
    said = f"connected to {platform}"
    if line.strip() == f"threadbot: {said}":
        return True
    with contextlib.suppress(ValueError):
        found = json.loads(line)
        return isinstance(found, dict) and found.get("message") == said
    return False


def ops_url(said: list[str]) -> str:
    """The address in the ``threadbot: operations on http://... (...)`` line of ``said``."""
    for line in said:
        if (found := re.search(r"operations on (http://\S+)", line)) is not None:
            return found.group(1)
    raise AssertionError(f"no operations address in {said}")


Sample = tuple[str, tuple[tuple[str, str], ...]]
"""A metric sample's name and its labels, sorted: ``("threadbot_outbox_depth", ())``."""


async def scrape(http: aiohttp.ClientSession, url: str) -> dict[Sample, float]:
    """``GET url/metrics``, parsed with prometheus-client's own parser: every sample."""
    async with http.get(f"{url}/metrics") as response:
        assert response.status == 200, await response.text()
        body = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


class Channel:
    """People in the Slack channel, talking to one bot process."""

    def __init__(self, api: FakeSlackApi, http: aiohttp.ClientSession) -> None:
        self.api = api
        self.http = http

    async def deliver(self, bot: Target, body: dict[str, Any], *, retry: int = 0) -> str | None:
        """Deliver one Events API body to ``bot`` as Slack does, ``retry`` its retry
        number: POSTed, signed, expecting 200 (``X-Slack-Retry-Num``); or as a Socket
        Mode envelope, acked (``retry_attempt``; the envelope's id is returned, the
        first one's with :attr:`SocketMode.again`)."""
        if isinstance(bot, SocketMode):

            async def send(connection: int | None, attempt: int) -> str:
                envelope_id = await bot.server.send_envelope(
                    "events_api",
                    body,
                    retry_attempt=attempt,
                    retry_reason="timeout" if attempt else "",
                    connection=connection,
                    timeout=WAIT,
                )
                await bot.server.ack(envelope_id, timeout=WAIT)
                return envelope_id

            if bot.again is None:
                return await send(bot.connection, retry)
            first, _ = await asyncio.gather(send(bot.connection, retry), send(bot.again, retry + 1))
            return first
        raw = json.dumps(body)
        headers = {"Content-Type": "application/json", **sign(raw, SECRET)}
        if retry:
            headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "timeout"}
        url = f"http://127.0.0.1:{bot.port}/slack/events"
        async with self.http.post(url, data=raw.encode(), headers=headers) as response:
            assert response.status == 200, await response.text()
        return None

    async def slash(self, bot: Listening, command: str = "/stop", text: str = "") -> None:
        """Alice types ``command`` in the channel (a signed slash-command form POST)."""
        form = dict(parse_qsl(fixture("slash_command_stop")["payload"], keep_blank_values=True))
        form.update(command=command, text=text, user_id=ALICE)
        raw = urlencode(form)
        headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(raw, SECRET)}
        url = f"http://127.0.0.1:{bot.port}/slack/events"
        async with self.http.post(url, data=raw.encode(), headers=headers) as response:
            assert response.status == 200, await response.text()

    async def mention(self, bot: Target, text: str) -> str:
        """Alice mentions the bot at the top of the channel; the message's ts."""
        said = f"<@{BOT_USER_ID}> {text}"
        ts = str(self.api.add_message(CHANNEL, said, user=ALICE)["ts"])
        body = event_body("app_mention")
        body["event"].update(text=said, user=ALICE, ts=ts, event_ts=ts)
        body["event"].pop("blocks", None)
        await self.deliver(bot, body)
        return ts

    async def mention_and_approve(self, bot: Target, text: str) -> str:
        """Alice mentions the bot and, once the plan is posted, approves it with ✅; the
        thread's ts."""
        thread = await self.mention(bot, text)
        await eventually(lambda: self.post_with(thread, "Plan (v1)"))
        plan = self.post_with(thread, "Plan (v1)")
        assert plan is not None
        await self.react(bot, str(plan["ts"]))
        return thread

    async def reply(self, bot: Target, thread: str, text: str) -> str:
        """Alice answers in ``thread`` (a plain message, no mention); the reply's ts."""
        ts = str(self.api.add_message(CHANNEL, text, user=ALICE, thread_ts=thread)["ts"])
        body = event_body("message_thread_reply")
        body["event"].update(text=text, user=ALICE, ts=ts, event_ts=ts, thread_ts=thread)
        await self.deliver(bot, body)
        return ts

    async def react(self, bot: Target, message: str, emoji: str = "white_check_mark") -> None:
        body = event_body("reaction_added")
        body["event"].update(user=ALICE, reaction=emoji)
        body["event"]["item"]["ts"] = message
        await self.deliver(bot, body)

    def bot_posts(self, thread: str) -> list[dict[str, Any]]:
        """The bot's messages in ``thread`` as they are now, oldest first."""
        return [m for m in self.api.thread(CHANNEL, thread) if m.get("user") == BOT_USER_ID]

    def texts(self, thread: str) -> list[str]:
        return [str(m.get("text", "")) for m in self.bot_posts(thread)]

    def post_with(self, thread: str, marker: str) -> dict[str, Any] | None:
        """The bot's last whole message in ``thread`` whose text holds ``marker``, or None.

        A streamed answer counts once its stream has stopped: while it streams, its text
        lacks the closing line (the requester's mention, the workflow) that
        ``chat.stopStream`` adds."""
        found = [
            m
            for m in self.bot_posts(thread)
            if marker in str(m.get("text", ""))
            and self.api.streams.get(str(m["ts"]), {}).get("state") != "streaming"
        ]
        return found[-1] if found else None
