"""Several ``threadbot run`` processes on one database, behind a round-robin proxy (issue 26)
or on Socket Mode connections of their own (issue 27).

The pieces the several-instances tests share:

- :class:`tests.fakes.round_robin.RoundRobin`: the load balancer in front of the
  processes (each Slack request to the next process in turn).
- :func:`instances`: the Slack fake (answering each post after ``post_delay``
  seconds: two processes that both deliver one message show it only then), the
  model fake with a responder, N :class:`tests.process_harness.BotProcess` on one
  database (a SQLite file, or a PostgreSQL database from the ``postgres_url``
  fixture: :func:`database_url`) and the proxy, as one :class:`Instances`; with
  ``socket_mode=True`` the processes receive over Socket Mode instead, one
  connection each, and the Socket Mode fake spreads the envelopes over them in
  turn, as Slack spreads them over an app's connections. :func:`processes` makes
  those processes, and :data:`PER_TEST`, :data:`FAKE_URLS` and :data:`TEST_ONLY` say
  which of their settings are the test's own rather than the deployment's
  (``deploy/compose.yaml`` sets up the same deployment).
- :func:`story_model`: a responder that gives every conversation whose mention says
  ``job N`` its own story: a plan, after the approval one ``run_command`` call
  (:func:`appending` by default: ``echo N >> side-effects.txt``), then the answer
  ``done N``. The sandbox shows a command its own conversation's workspace only,
  so each side effect is a line in that workspace's file, and
  :func:`side_effects` counts them over every workspace.
- :func:`gated`: a job's command that waits for the test (:func:`release`), noting
  when it starts, for tests that need many commands running at once;
  :func:`live_markers` tells whether their processes still live.
- :func:`converse` tells one such conversation as a person does (mention, ✅ on the
  plan, wait for the answer; :func:`opened` stops after the ✅; :func:`reply`
  answers in a thread); :func:`finished` waits for many, failing only when nothing
  happened at all for :data:`STALL` seconds, with what is missing; :func:`doubles`,
  :func:`posted` and :func:`holders` read what the threads and the store hold.

Tests wait on what the fakes and the store hold, never on the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.anthropic_server import (
    ApiError,
    FakeAnthropicServer,
    Responder,
    Scripted,
    tool_use,
)
from tests.fakes.round_robin import RoundRobin
from tests.fakes.slack_api import FakeSlackApi
from tests.fakes.slack_socket import FakeSocketModeServer
from tests.process_harness import WAIT, BotProcess, Channel, SocketMode, Target
from tests.slack_harness import ALICE, CHANNEL, event_body

BACKENDS = ["sqlite", "postgresql"]
"""The stores the several-instances tests run on (their ``database`` parameter)."""
STALL = 60.0
"""Seconds without one more Slack call or model request before a test that waits for
many conversations gives up and says what is missing (on a machine ten times
slower, something still happens well within this while work goes on)."""
SIDE_EFFECTS = "side-effects.txt"
"""The file, in a conversation's workspace, its job's command appends its line to."""
PLAN = "Plan (v1)"
"""What the message of a conversation's first plan says (and still says once decided)."""

FAKE_URLS = frozenset({"SLACK_API_URL", "ANTHROPIC_BASE_URL"})
"""Settings of every process (:func:`processes`) that point it at the fakes: a deployment
leaves them unset, so the bot talks to Slack and Anthropic."""
TEST_ONLY = frozenset({"THREADBOT_RUNNING_NOTE_EVERY"})
"""Settings of every process that make the threads the ones the tests expect, however
slow the machine (no "still running" notes): a deployment keeps the defaults."""
PER_TEST = frozenset(
    {
        "THREADBOT_SLACK_HOST",
        "THREADBOT_SLACK_PORT",
        "THREADBOT_WORKSPACE_ROOT",
        "THREADBOT_DATABASE_URL",
        "THREADBOT_INSTANCE",
    }
)
"""Settings of every process whose values are the test's own: where it listens, its
folder, its database and each process's name. A deployment sets the same names to
values of its own; what defines it is still the same: one database for all (of the
same driver), one workspace folder for all, a distinct name for each. The other
settings of every process, names and values, are the deployment's
(``deploy/compose.yaml``, checked by ``tests/test_deploy_files.py``)."""


def database_url(request: pytest.FixtureRequest, backend: str) -> str | None:
    """The store URL for ``backend`` (one of :data:`BACKENDS`): None for the SQLite file
    that processes with one ``tmp_path`` share (:class:`BotProcess`'s default), or this
    test's fresh PostgreSQL database (the ``postgres_url`` fixture; skipped where no
    server answers, failed under CI)."""
    if backend == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


@dataclass
class Instances:
    """Bot processes on one database behind a :class:`RoundRobin` (HTTP mode) or each
    on a Socket Mode connection of its own (``socket``), and the fakes they talk to.
    ``channel`` speaks as people do; send to :attr:`front` (or to one of ``bots``
    directly over HTTP, to one connection with :class:`SocketMode`). ``threads`` maps each
    job number :func:`converse` opened to its thread's ts."""

    api: FakeSlackApi
    model: FakeAnthropicServer
    channel: Channel
    bots: list[BotProcess]
    proxy: RoundRobin | None
    root: Path
    socket: FakeSocketModeServer | None = None
    threads: dict[int, str] = field(default_factory=dict)

    @property
    def front(self) -> Target:
        """Where Slack delivers people's events: the proxy, or the Socket Mode fake
        (each envelope to the next connection in turn)."""
        if self.socket is not None:
            return SocketMode(self.socket)
        assert self.proxy is not None
        return self.proxy

    @property
    def workspaces(self) -> Path:
        """The folder every process keeps the conversations' workspaces in."""
        return self.root / "workspaces"

    def progress(self) -> int:
        """A count that grows while anything happens: Slack calls and model requests."""
        return len(self.api.calls) + len(self.model.requests)

    def logs(self) -> str:
        """The end of every process's stderr, for a failure message."""
        return "\n".join(
            f"--- {bot.env.get('THREADBOT_INSTANCE', bot.port)} said ---\n{bot.log[-2000:]}"
            for bot in self.bots
            if bot.log
        )

    async def stop(self) -> list[int]:
        """SIGTERM every live process and wait for it; their exit codes (a killed one's
        stays negative)."""
        for bot in self.bots:
            if bot.proc is not None and bot.proc.returncode is None:
                bot.signal(signal.SIGTERM)
        return [await bot.wait() for bot in self.bots]


def processes(
    tmp_path: Path,
    api: FakeSlackApi,
    model_url: str,
    *,
    database: str | None,
    count: int = 2,
    socket_mode: bool = False,
    launcher: str = "bot",
    environ: Mapping[str, str] | None = None,
    **settings: str,
) -> list[BotProcess]:
    """The ``count`` processes :func:`instances` starts, not started yet: ``instance-1``...
    on ``database``, talking to ``api`` and the model fake at ``model_url``, sharing
    ``tmp_path``, over Socket Mode when ``socket_mode``; ``settings``: more ``THREADBOT_*``
    variables of every process; ``launcher`` and ``environ`` as :class:`BotProcess` takes
    them. What each is given is its :attr:`BotProcess.settings` (see :data:`PER_TEST`)."""
    return [
        BotProcess(
            tmp_path,
            api,
            model_url,
            database_url=database,
            instance=f"instance-{n}",
            socket_mode=socket_mode,
            launcher=launcher,
            environ=environ,
            **settings,
        )
        for n in range(1, count + 1)
    ]


@contextlib.asynccontextmanager
async def instances(
    tmp_path: Path,
    respond: Responder,
    *,
    database: str | None,
    count: int = 2,
    post_delay: float = 0.3,
    model_delay: float = 0.0,
    socket_mode: bool = False,
    launcher: str = "bot",
    environ: Mapping[str, str] | None = None,
    **settings: str,
) -> AsyncIterator[Instances]:
    """``count`` bot processes (``instance-1``...) on ``database`` (see
    :func:`database_url`), started at once, behind a :class:`RoundRobin`, or, with
    ``socket_mode``, each on its Socket Mode connection to a
    :class:`FakeSocketModeServer` that sends each envelope to the next connection in
    turn (``spread="round_robin"``; yielded once all ``count`` are open); the Slack
    fake answers each post after ``post_delay`` seconds and the model fake answers
    with ``respond``, each answer after ``model_delay`` seconds. ``settings``:
    ``THREADBOT_*`` variables of every process; ``launcher`` and ``environ`` as
    :class:`BotProcess` takes them. Every
    process is killed on the way out (:meth:`Instances.stop` first for a clean end)."""
    async with contextlib.AsyncExitStack() as stack:
        socket = None
        if socket_mode:
            socket = FakeSocketModeServer(spread="round_robin")
            await stack.enter_async_context(socket)
        api = await stack.enter_async_context(
            FakeSlackApi(post_delay=post_delay, socket_url=socket.url if socket else None)
        )
        model = await stack.enter_async_context(
            FakeAnthropicServer(respond=respond, delay=model_delay)
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        bots = processes(
            tmp_path,
            api,
            model.base_url,
            database=database,
            count=count,
            socket_mode=socket_mode,
            launcher=launcher,
            environ=environ,
            **settings,
        )
        try:
            await asyncio.gather(*(bot.start() for bot in bots))
            channel = Channel(api, http)
            if socket is not None:
                await socket.wait_connections(count, timeout=WAIT)
                yield Instances(api, model, channel, bots, None, tmp_path, socket)
            else:
                async with RoundRobin(bots) as proxy:
                    yield Instances(api, model, channel, bots, proxy, tmp_path)
        finally:
            for bot in bots:
                await bot.kill()


# -- the story model --------------------------------------------------------------------

_JOB = re.compile(r"\bjob (\d+)\b")


def _texts(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b]


def job_number(body: Mapping[str, Any]) -> int | None:
    """The ``N`` of ``job N`` in the first user message of a Messages API request body."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            found = _JOB.search(" ".join(_texts(message)))
            return int(found.group(1)) if found else None
    return None


def called(body: Mapping[str, Any]) -> set[str]:
    """The ids of the ``tool_use`` blocks of a request body's assistant messages."""
    ids: set[str] = set()
    for message in body.get("messages", []):
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            ids |= {b["id"] for b in message["content"] if b.get("type") == "tool_use"}
    return ids


def appending(n: int) -> str:
    """Job ``n``'s command: appends the line ``n`` to :data:`SIDE_EFFECTS` in its workspace."""
    return f"echo {n} >> {SIDE_EFFECTS}"


def story_model(command: Callable[[int], str] = appending) -> Responder:
    """A responder (:class:`FakeAnthropicServer` ``respond``) for conversations opened
    with ``job N``: first the plan (``propose_plan``, id ``toolu_plan_N``), after it one
    ``run_command`` of ``command(N)`` (id ``toolu_job_N``), after its result (whatever
    it says) the answer ``done N`` by a ``finish`` call (id ``toolu_finish_N``). A
    request without ``job N`` answers 400, so a request nobody expected shows in the
    process's log."""

    def respond(body: dict[str, Any]) -> Scripted:
        n = job_number(body)
        if n is None:
            return ApiError.invalid_request("story model: no `job N` in the first user message")
        asked = called(body)
        if f"toolu_job_{n}" in asked:
            return [tool_use(f"toolu_finish_{n}", "finish", {"answer": f"done {n}"})]
        if f"toolu_plan_{n}" in asked:
            return [tool_use(f"toolu_job_{n}", "run_command", {"command": command(n)})]
        return [tool_use(f"toolu_plan_{n}", "propose_plan", {"steps": [f"Run job {n}"]})]

    return respond


def requests_of(model: FakeAnthropicServer, n: int) -> list[dict[str, Any]]:
    """The bodies of the model requests made for job ``n``'s conversation, in order."""
    return [r.body for r in model.requests if job_number(r.body) == n]


def side_effects(workspaces: Path, name: str = SIDE_EFFECTS) -> Counter[str]:
    """How often each line was appended to the file ``name`` (:data:`SIDE_EFFECTS` by
    default), over every workspace under ``workspaces``."""
    lines: Counter[str] = Counter()
    for found in workspaces.glob(f"*/{name}"):
        lines.update(found.read_text().split())
    return lines


STARTED = "started.txt"
"""The file, in a conversation's workspace, a :func:`gated` command appends its line to
as it starts."""
GO = "go"
"""The file whose presence in its workspace lets a :func:`gated` command go on."""


def gated(n: int, marker: str) -> str:
    """Job ``n``'s command that waits for the test: it appends ``n`` to :data:`STARTED`,
    waits until :data:`GO` is in its workspace (looking every ``sleep marker``
    seconds: ``marker`` is a number of seconds no other process has on its command
    line, so :func:`live_markers` finds the command), then appends ``n`` to
    :data:`SIDE_EFFECTS`."""
    return (
        f"echo {n} >> {STARTED}; while [ ! -f {GO} ]; do sleep {marker}; done; "
        f"echo {n} >> {SIDE_EFFECTS}"
    )


def release(workspaces: Path) -> None:
    """Let every :func:`gated` command under ``workspaces`` go on (creates :data:`GO` in
    each conversation's workspace)."""
    for workspace in workspaces.iterdir():
        if workspace.is_dir():
            (workspace / GO).touch()


def live_markers(markers: Iterable[str]) -> set[str]:
    """Those of ``markers`` that the command line of a live process holds (any PID
    namespace; one pass over ``/proc``)."""
    wanted = set(markers)
    found: set[str] = set()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if not entry.name.isdigit():
                continue
            line = (entry / "cmdline").read_bytes().decode(errors="replace")
            if "Z" in (entry / "stat").read_text().rpartition(")")[2][:3]:
                continue  # a zombie runs nothing
            found |= {m for m in wanted if m in line}
    return found


def holders(world: Instances, bot: BotProcess) -> dict[int, str | None]:
    """Per job number (of :attr:`Instances.threads`), the instance that holds its
    conversation's run lease now (``conversations.lease_owner``; None: nobody), read
    through ``bot``'s store."""
    job = {thread: n for n, thread in world.threads.items()}
    rows = bot.query("select thread, lease_owner from conversations")
    return {job[thread]: owner for thread, owner in rows if thread in job}


def per_job(world: Instances, bot: BotProcess, statement: str) -> dict[int, Any]:
    """``statement``'s rows, each ``(thread, value)``, as value per job number."""
    job = {thread: n for n, thread in world.threads.items()}
    return {job[thread]: value for thread, value in bot.query(statement) if thread in job}


# -- what the threads hold ---------------------------------------------------------------


def posted(api: FakeSlackApi, thread: str) -> list[str]:
    """The texts the bot posted in ``thread`` (``chat.postMessage`` answered ok), as posted
    (before any edit), in the order the posts arrived; an answer streamed into the thread
    (``chat.startStream``: docs/architecture.md "Streamed answers") as its message is now."""
    said = []
    for call in api.calls:
        if not call.ok or str(call.args.get("thread_ts") or "") != thread:
            continue
        if call.method == "chat.postMessage":
            said.append(str(call.args.get("text") or ""))
        elif call.method == "chat.startStream":
            message = api.message(str(call.args["channel"]), str(call.response["ts"]))
            said.append(str((message or {}).get("text") or ""))
    return said


def is_answer(said: str, n: int) -> bool:
    """Whether a posted text is job ``n``'s answer (``✅ done N``, then the footer)."""
    return said.split("\n", 1)[0].removeprefix("✅").strip() == f"done {n}"


def doubles(api: FakeSlackApi, threads: Mapping[int, str]) -> dict[int, dict[str, int]]:
    """Per job number, the texts posted more than once in its thread, and how often."""
    found = {}
    for n, thread in threads.items():
        twice = {t: k for t, k in Counter(posted(api, thread)).items() if k > 1}
        if twice:
            found[n] = twice
    return found


def said_twice(found: Mapping[int, Mapping[str, int]], of: int) -> str:
    """A failure message naming the threads of :func:`doubles` (the first ten in full)."""
    lines = [f"{len(found)} of {of} threads got a text posted more than once:"]
    for n, texts in sorted(found.items())[:10]:
        shown = "; ".join(f"{k}x {t[:60]!r}" for t, k in texts.items())
        lines.append(f"  job {n}: {shown}")
    if len(found) > 10:
        lines.append(f"  ... and {len(found) - 10} more threads")
    return "\n".join(lines)


# -- people ----------------------------------------------------------------------------


async def until(condition: Callable[[], object]) -> None:
    """Return once ``condition()`` holds (polled every 50 ms, for as long as it takes:
    :func:`finished` watches for a stall)."""
    while not condition():  # noqa: ASYNC110 (the condition reads another process's state)
        await asyncio.sleep(0.05)


def plans(world: Instances, thread: str) -> list[dict[str, Any]]:
    """The bot's messages in ``thread`` that show the first plan, oldest first."""
    return [m for m in world.channel.bot_posts(thread) if PLAN in str(m.get("text", ""))]


def offered(message: Mapping[str, Any]) -> bool:
    """Whether the bot put its ✅ under ``message`` (it does so under a plan once Slack
    answered the plan's post: the bot knows the message then)."""
    return any(r.get("name") == "white_check_mark" for r in message.get("reactions", []))


async def opened(world: Instances, n: int, via: Target | None = None) -> str:
    """Alice mentions the bot with ``job n`` (through ``via``, by default
    :attr:`Instances.front`) and approves the plan with ✅ once the bot offered its ✅
    under it (on the first such copy, were there two); the thread's ts."""
    target = via if via is not None else world.front
    thread = await world.channel.mention(target, f"job {n}")
    world.threads[n] = thread
    await until(lambda: [m for m in plans(world, thread) if offered(m)])
    plan = next(m for m in plans(world, thread) if offered(m))
    await world.channel.react(target, str(plan["ts"]))
    return thread


async def converse(world: Instances, n: int, via: Target | None = None) -> str:
    """Job ``n``'s whole story (:func:`opened` through ``via``, then its answer ``done
    n`` posted); the thread's ts."""
    thread = await opened(world, n, via)
    await until(lambda: any(is_answer(t, n) for t in posted(world.api, thread)))
    return thread


async def reply(world: Instances, target: Target, thread: str, said: str) -> str:
    """Alice answers in ``thread`` (a plain message, no mention), sent to ``target`` (one
    process, the proxy, or a Socket Mode connection); the reply's ts."""
    ts = str(world.api.add_message(CHANNEL, said, user=ALICE, thread_ts=thread)["ts"])
    body = event_body("message_thread_reply")
    body["event"].update(text=said, user=ALICE, ts=ts, event_ts=ts, thread_ts=thread)
    await world.channel.deliver(target, body)
    return ts


def missing(world: Instances, numbers: Iterable[int]) -> str:
    """What the conversations of ``numbers`` lack so far, for a failure message."""
    not_opened, no_plan, no_answer = [], [], []
    for n in numbers:
        thread = world.threads.get(n)
        if thread is None:
            not_opened.append(n)
        elif not plans(world, thread):
            no_plan.append(n)
        elif not any(is_answer(t, n) for t in posted(world.api, thread)):
            no_answer.append(n)
    said = f"not yet mentioned: {not_opened}; no plan posted: {no_plan}; no answer: {no_answer}"
    if no_answer:  # where each stands in the store, to say why
        state = per_job(
            world,
            world.bots[0],
            "select c.thread, c.lifecycle || ' lease ' || coalesce(c.lease_owner, '-') "
            "|| ' claim ' || coalesce(c.delivery_owner, '-') || ' pending ' || cast(("
            "select count(*) from outbox o where o.conversation_id = c.id "
            "and o.state = 'pending') as text) from conversations c",
        )
        said += f"; in the store: {[state.get(n) for n in no_answer]}"
    return said


async def finished(
    world: Instances, work: Iterable[Awaitable[object]], what: Callable[[], str], *, at_once: int
) -> None:
    """Await every one of ``work`` (at most ``at_once`` at a time); fail when
    :meth:`Instances.progress` stood still for :data:`STALL` seconds, with ``what()``
    (what is missing), the doubles so far and the processes' logs."""
    gate = asyncio.Semaphore(at_once)

    async def one(step: Awaitable[object]) -> None:
        async with gate:
            await step

    task = asyncio.ensure_future(asyncio.gather(*(one(step) for step in work)))
    loop = asyncio.get_running_loop()
    seen, since = world.progress(), loop.time()
    try:
        while not (await asyncio.wait({task}, timeout=1.0))[0]:
            if world.progress() != seen:
                seen, since = world.progress(), loop.time()
            elif loop.time() - since > STALL:
                found = doubles(world.api, world.threads)
                twice = f"\n{said_twice(found, len(world.threads))}" if found else ""
                raise AssertionError(
                    f"nothing happened for {STALL:g} s: {what()}{twice}\n{world.logs()}"
                )
        task.result()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def settled(world: Instances, bot: BotProcess) -> list[tuple[Any, ...]]:
    """Wait (up to :data:`tests.process_harness.WAIT`) until the store holds no pending
    outbox row; the ones still pending then (conversation, purpose) for the failure."""

    def pending() -> list[tuple[Any, ...]]:
        return bot.query("select conversation_id, purpose from outbox where state = 'pending'")

    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WAIT):
            await until(lambda: not pending())
    return pending()
