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
from typing import Any, TextIO

from pydantic import SecretStr

from adapters.console import ConsoleAdapter
from adapters.discord.directory import DiscordDirectory
from adapters.discord.runner import DiscordAdapter, DiscordConfig
from adapters.slack.directory import SlackDirectory
from adapters.slack.runner import SlackAdapter, SlackConfig
from bot.app import App, build, model_for
from bot.errors import StartFailed
from bot.settings import Settings
from conversations.membership import Membership
from core.model import Model
from core.scripted import DemoModel


async def run_console(
    settings: Settings,
    *,
    input: TextIO | None = None,
    output: TextIO | None = None,
    model: Model | None = None,
) -> int:
    """Run the console adapter until end of input; returns the exit code (0)."""
    chosen = model or model_for(settings)
    if isinstance(chosen, DemoModel):
        banner = "threadbot: no ANTHROPIC_API_KEY set, using the built-in demo model."
    else:
        banner = f"threadbot: using the model {chosen.name}."
    console = ConsoleAdapter(
        input=input,
        output=output,
        user=settings.console_user,
        state_file=settings.console_state,
        stop_command=settings.stop_command,
        wait_between_lines={"auto": None, "yes": True, "no": False}[settings.console_wait],
        banner=banner + " Type a request; /help lists the commands.",
    )
    app = await build(settings, model=chosen)
    app.add_sender(console)
    try:
        await app.start()
        work = console.run(app.hub, settled=app.hub.settled, working=app.hub.working)
        return await serve(app, work, (signal.SIGINT, signal.SIGTERM))
    finally:
        await app.close()


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
            print(f"threadbot: {failed.result()}", file=sys.stderr, flush=True)
            return 1
        if on_signal is not None:
            await on_signal()
        await app.shutdown()
        return 0
    finally:
        if not stopping.is_set():
            for signum in signals:
                loop.remove_signal_handler(signum)
        for task in (main, stop, failed):
            task.cancel()
        await asyncio.gather(main, stop, failed, return_exceptions=True)


PlatformAdapter = SlackAdapter | DiscordAdapter


def platform_adapters(settings: Settings) -> list[PlatformAdapter]:
    """Every platform adapter that has credentials in ``settings``.

    Raises ``ValueError`` for a Slack token without a way to receive events.
    """
    adapters: list[PlatformAdapter] = []
    if settings.slack_bot_token is not None:
        if settings.slack_app_token is None and settings.slack_signing_secret is None:
            raise ValueError(
                "SLACK_BOT_TOKEN is set: also set SLACK_APP_TOKEN (Socket Mode) or "
                "SLACK_SIGNING_SECRET (HTTP mode)"
            )
        adapters.append(
            SlackAdapter(
                SlackConfig(
                    bot_token=settings.slack_bot_token.get_secret_value(),
                    app_token=_secret(settings.slack_app_token),
                    signing_secret=_secret(settings.slack_signing_secret),
                    api_url=settings.slack_api_url,
                    host=settings.slack_host,
                    port=settings.slack_port,
                    stop_command=settings.stop_command,
                    allow_bots=settings.allow_bots,
                    bot_thread_cap=settings.bot_thread_cap,
                    file_threshold=settings.file_threshold,
                )
            )
        )
    if settings.discord_token is not None:
        adapters.append(
            DiscordAdapter(
                DiscordConfig(
                    token=settings.discord_token.get_secret_value(),
                    api_url=settings.discord_api_url,
                    gateway_url=settings.discord_gateway_url,
                    guilds=tuple(settings.discord_guilds),
                    stop_command=settings.stop_command,
                    allow_bots=settings.allow_bots,
                    bot_thread_cap=settings.bot_thread_cap,
                    file_threshold=settings.file_threshold,
                )
            )
        )
    return adapters


def directory_for(adapter: PlatformAdapter) -> Membership:
    """The group lookup of ``adapter``'s platform: Slack user groups, Discord roles."""
    if isinstance(adapter, SlackAdapter):
        return SlackDirectory(client=adapter.client)
    return DiscordDirectory(client=adapter.client)


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


async def run_platforms(settings: Settings, adapters: list[PlatformAdapter]) -> int:
    """Run the platform adapters until SIGINT or SIGTERM; returns the exit code.

    0 after a graceful shutdown, 1 when a background task gave up.
    """
    app = await build(settings)

    async def stop_receiving() -> None:
        for adapter in adapters:
            await adapter.stop_receiving()

    async def connect() -> int:
        for adapter in adapters:
            try:
                await adapter.start(app.hub)
            except Exception as exc:
                raise StartFailed(adapter.platform, exc) from exc
            app.supervise(f"{adapter.platform} connection", adapter.keep_connected)
            print(f"threadbot: connected to {adapter.platform}", flush=True)
        await asyncio.Event().wait()  # until a signal or a failure
        return 0

    try:
        for adapter in adapters:
            app.add_sender(adapter)
            app.add_membership(directory_for(adapter))
        await app.start()
        return await serve(app, connect(), (signal.SIGINT, signal.SIGTERM), stop_receiving)
    finally:
        for adapter in adapters:
            await adapter.close()
        await app.close()
