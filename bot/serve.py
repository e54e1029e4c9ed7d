"""Running threadbot: the console or the platform adapters, beside the app's background work.

:func:`serve` runs the work of a command (the console's input loop, or the
platform connections) until it ends, a signal asks for a graceful shutdown, or a
supervised background task gives up; :func:`run_console` and
:func:`run_platforms` are what ``threadbot console`` and ``threadbot run`` call.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from adapters.console import ConsoleAdapter
from bot.app import App, build
from bot.engines import model_for
from bot.errors import OpsUnavailable, StartFailed
from bot.inspector.routes import inspector_address, install
from bot.inspector.web import Inspector
from bot.logs import announce
from bot.ops import PATHS, Operations
from bot.platforms import directory_for
from bot.schedules import on_console
from bot.settings import Settings
from conversations.store.sql.failures import sqlite_file
from conversations.sweeper import utc_now
from core.models.base import Model
from core.models.demo import DemoModel
from core.secrets import Redactor

if TYPE_CHECKING:
    from bot.platforms import PlatformAdapter


async def run_console(
    settings: Settings,
    *,
    input: TextIO | None = None,
    output: TextIO | None = None,
    model: Model | None = None,
) -> int:
    """Run the console adapter until end of input; returns the exit code (0).

    With ``inspector`` on, the operations address serves the run inspector beside it
    (its address in the banner); raises :class:`OpsUnavailable` when it cannot listen,
    and :class:`adapters.console.ConsoleError` when the console's state file cannot be
    used (another console holds it: :mod:`adapters.console.state`)."""
    chosen = model or model_for(settings)
    if isinstance(chosen, DemoModel):
        banner = "threadbot: no ANTHROPIC_API_KEY set, using the built-in demo model."
    else:
        banner = f"threadbot: using the model {chosen.name}."
    banner += " Type a request; /help lists the commands."
    database = sqlite_file(settings.database_url)
    had_database = database is not None and database.is_file() and database.stat().st_size > 0
    console = ConsoleAdapter(
        input=input,
        output=output,
        user=settings.console_user,
        state_file=settings.console_state,
        stop_command=settings.stop_command,
        wait_between_lines={"auto": None, "yes": True, "no": False}[settings.console_wait],
        banner=banner,
    )
    try:
        if had_database and console.state_created:
            console.banner = f"{banner}\n{_new_state_file(settings.console_state, database)}"
        return await _console_app(settings, console, chosen, close_model=model is None)
    finally:
        console.close()


async def _console_app(
    settings: Settings, console: ConsoleAdapter, chosen: Model, *, close_model: bool
) -> int:
    """Build the app for ``console`` and serve it until the console's input ends."""
    app = await build(settings, model=chosen)
    if close_model:  # made by run_console: closed with the app
        app.close_model = getattr(chosen, "aclose", None)
    scheduler = app.sweeper.scheduler
    if scheduler is not None:  # the console's schedules run in its session
        scheduler.schedules = on_console(scheduler.schedules, console.session)
    app.add_sender(console)
    app.add_texts(console.texts)
    ops = operations_for(settings, app, {}) if settings.inspector else None
    async with app:
        if ops is not None:  # the console has no operations address but for the inspector
            try:
                address = await ops.start()
            except OSError as exc:
                raise OpsUnavailable(ops.address, exc) from exc
            where = inspector_address(settings, address)
            console.banner = f"{console.banner}\nthreadbot: run inspector on {where}"
        try:
            work = console.run(app.hub, settled=app.hub.settled, working=app.hub.working)
            return await serve(app, work, (signal.SIGINT, signal.SIGTERM))
        finally:
            if ops is not None:
                await ops.close()


def _new_state_file(state: Path, database: Path | None) -> str:
    """What the console says when its state file is new beside an existing database."""
    return (
        f"threadbot: the console's state file {state} was missing, but the database "
        f"{database} was not: messages are numbered from [1] again, and the threads "
        "before cannot be replied to by number (delete both to start afresh)."
    )


async def serve(
    app: App,
    work: Coroutine[Any, Any, int],
    signals: tuple[signal.Signals, ...],
    on_signal: Callable[[], Awaitable[None]] | None = None,
) -> int:
    """Run ``work`` beside the started ``app`` until it ends, a signal comes, or a task fails.

    Returns ``work``'s exit code when it ends. On one of ``signals`` (a service
    manager's SIGTERM): ``on_signal()`` (the adapters stop receiving), then
    :meth:`App.shutdown`, and 0. When a background task gave up: its reason on
    stderr, and 1.
    """
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()

    def first_signal() -> None:  # a second one gets Python's default (Ctrl-C: leave now)
        for signum in signals:
            loop.remove_signal_handler(signum)
        stopping.set()

    for signum in signals:
        loop.add_signal_handler(signum, first_signal)
    main = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(stopping.wait())
    failed = asyncio.ensure_future(app.wait_failed())
    try:
        await asyncio.wait({main, stop, failed}, return_when=asyncio.FIRST_COMPLETED)
        if main.done():
            return main.result()
        if failed.done():
            announce(str(failed.result()), level="CRITICAL", stream=sys.stderr)
            return 1
        if on_signal is not None:
            await on_signal()
        if busy := app.hub.working():
            announce(_waiting_for_runs(busy, app.shutdown_grace), stream=sys.stderr)
        await app.shutdown()
        return 0
    finally:
        if not stopping.is_set():
            for signum in signals:
                loop.remove_signal_handler(signum)
        for task in (main, stop, failed):
            task.cancel()
        await asyncio.gather(main, stop, failed, return_exceptions=True)


def _waiting_for_runs(busy: int, grace: float) -> str:
    """What a shutdown says while runs finish their step (a command may take the grace)."""
    runs = "1 run" if busy == 1 else f"{busy} runs"
    return (
        f"shutting down: waiting up to {grace:g} s for {runs} to finish the "
        "step in progress (it goes on at the next start); a second Ctrl-C or SIGTERM leaves "
        "at once"
    )


def operations_for(
    settings: Settings, app: App, platforms: dict[str, Callable[[], Awaitable[bool]]]
) -> Operations:
    """The operations address of ``app`` (not started), checking ``platforms`` in
    ``/readyz``, with the run inspector mounted when ``settings.inspector`` is on."""
    assert app.metrics is not None
    ops = Operations(
        host=settings.ops_host,
        port=settings.ops_port,
        health=app.store.health,
        metrics=app.metrics,
        platforms=platforms,
        clock=utc_now,
    )
    if settings.inspector:
        inspector = Inspector(
            store=app.store,
            settings=settings,
            redactor=app.redactor or Redactor(),
            clock=utc_now,
            commits=app.commits,
        )
        ops.mount(lambda web_app: install(web_app, inspector, stopper=app.hub.stopper))
    return ops


DEMO_ON_PLATFORMS = (
    "no ANTHROPIC_API_KEY set: the built-in demo model answers every mention on the "
    "platforms (a demo plan, a question, a file written in the workspace); set "
    "ANTHROPIC_API_KEY (or THREADBOT_ANTHROPIC_API_KEY_FILE) for Claude"
)
"""Said on stderr when ``threadbot run`` connects to a platform without a model key:
the console says so in its banner, but nobody on a platform reads the process's start."""


async def run_platforms(
    settings: Settings, adapters: list[PlatformAdapter], *, redactor: Redactor | None = None
) -> int:
    """Run the platform adapters until SIGINT or SIGTERM; returns the exit code.

    ``redactor``: the logs' (it learns the tokens of new installs too).
    With Slack installs, the install and redirect paths are served on the operations
    address in Socket Mode (beside ``/slack/events`` in HTTP mode), and said at start.

    Without a model key, the demo model answers, and :data:`DEMO_ON_PLATFORMS` says so
    on stderr once the platforms are connected. The operations address (:mod:`bot.ops`)
    listens first, so ``/healthz`` answers while the platforms connect (``/readyz`` does
    once they have). 0 after a graceful shutdown, 1 when a background task gave up.
    Raises :class:`OpsUnavailable` when the operations address cannot be listened on,
    :class:`StartFailed` when a platform cannot be started.
    """
    app = await build(settings, redactor=redactor)
    ops = operations_for(
        settings, app, {adapter.platform: adapter.connected for adapter in adapters}
    )

    async def stop_receiving() -> None:
        ops.draining = True
        for adapter in adapters:
            await adapter.stop_receiving()

    async def connect() -> int:
        try:
            address = await ops.start()
        except OSError as exc:
            raise OpsUnavailable(ops.address, exc) from exc
        announce(f"operations on {address} ({' '.join(PATHS)})")
        if settings.inspector:
            where = inspector_address(settings, address)
            announce(f"run inspector on {where} (operators sign in)")
        for path in ops.pages:
            if path.endswith("/install"):
                announce(f"Slack installs at {address}{path}")
        for adapter in adapters:
            try:
                await adapter.start(app.hub)
            except Exception as exc:
                raise StartFailed(adapter.platform, exc) from exc
            app.supervise(f"{adapter.platform} connection", adapter.keep_connected)
            if (events := getattr(adapter, "address", None)) is not None:
                announce(f"Slack events on {events}")
                if getattr(adapter, "installations", None) is not None:
                    announce(f"Slack installs at {events.rsplit('/', 2)[0]}/slack/install")
            announce(f"connected to {adapter.platform}")
        if settings.anthropic_api_key is None and settings.model_script is None:
            announce(DEMO_ON_PLATFORMS, level="WARNING", stream=sys.stderr)
        await asyncio.Event().wait()  # until a signal or a failure
        return 0

    for adapter in adapters:
        if app.installs is not None and (use := getattr(adapter, "use_installs", None)):
            use(app.installs)
            for path, page in getattr(adapter, "oauth_routes", {}).items():
                ops.add_page(path, page)
        app.add_sender(adapter)
        app.add_membership(directory_for(adapter))
        app.add_texts(adapter.texts)
        app.add_fetcher(adapter.files)
        if app.metrics is not None:
            adapter.rate_limited = app.metrics.rate_limited_by(adapter.platform)
    async with app:
        try:
            return await serve(app, connect(), (signal.SIGINT, signal.SIGTERM), stop_receiving)
        finally:
            await ops.close()
            for adapter in adapters:
                await adapter.close()
