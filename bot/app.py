"""Wiring: build the store, the engine, the hub and the adapters, and run them.

Everything is built here and nowhere else (DESIGN.md: ``bot`` wires all three
packages). :func:`build` returns an :class:`App` that tests drive directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

from pydantic import SecretStr

from adapters.console import ConsoleAdapter
from adapters.discord.runner import DiscordAdapter, DiscordConfig
from adapters.slack.runner import SlackAdapter, SlackConfig
from bot.settings import Settings
from conversations import migrate
from conversations.access import AccessPolicy
from conversations.adapter import Sender
from conversations.hub import Hub, HubSettings
from conversations.outbox import Deliverer
from conversations.render import render_event
from conversations.store import Store
from conversations.store.store import create_engine
from conversations.sweeper import Sweeper, utc_now
from core.anthropic_model import anthropic_model_from
from core.engine import Engine, EngineSettings
from core.faults import Faults
from core.model import Model
from core.scripted import DemoModel, ScriptFileModel
from core.tools.base import Toolbox
from core.tools.command import RunCommand
from core.tools.control import control_tools
from core.tools.workspace import EditFile, ListFiles, ReadFile, WriteFile
from core.workflow import default_workflow


def default_toolbox() -> Toolbox:
    """The control tools and the workspace tools."""
    return Toolbox(
        [*control_tools(), ListFiles(), ReadFile(), WriteFile(), EditFile(), RunCommand()]
    )


def model_for(settings: Settings) -> Model:
    """Claude when ``ANTHROPIC_API_KEY`` is set, else the built-in demo model."""
    if settings.model_script is not None:
        return ScriptFileModel(str(settings.model_script))
    if settings.anthropic_api_key is None:
        return DemoModel()
    return anthropic_model_from(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        model=settings.model,
    )


@dataclass
class App:
    """A built threadbot: start the deliverer, feed the hub, close when done."""

    store: Store
    engine: Engine
    hub: Hub
    deliverer: Deliverer
    sweeper: Sweeper
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def add_sender(self, sender: Sender) -> None:
        """Deliver outbox rows of ``sender.platform`` through ``sender``."""
        self.deliverer.add_sender(sender)

    async def start(self) -> None:
        """Start the deliverer and the sweeper, and resume runs a crash left ``running``."""
        self._tasks.append(asyncio.create_task(self.deliverer.run(), name="deliverer"))
        self._tasks.append(asyncio.create_task(self.sweeper.run(), name="sweeper"))
        self.deliverer.wake()
        await self.hub.resume_running()
        await self.hub.resume_unhandled()

    async def close(self) -> None:
        """Stop work and close the database (in-flight runs resume at the next start)."""
        await self.hub.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.store.close()


async def build(
    settings: Settings,
    *,
    model: Model | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], datetime] = utc_now,
    toolbox: Toolbox | None = None,
) -> App:
    """Build and migrate everything for ``settings``; ``model`` and ``toolbox`` override."""
    settings.workspace_root.mkdir(parents=True, exist_ok=True)  # OSError: not usable
    engine_db = create_engine(settings.database_url)
    await migrate.upgrade(engine_db)
    deliverer_ref: list[Deliverer] = []
    store = Store(
        engine=engine_db,
        render=render_event,
        on_outbox=lambda: deliverer_ref[0].wake() if deliverer_ref else None,
    )
    faults = Faults(settings.fault)
    deliverer = Deliverer(
        store=store,
        faults=faults,
        senders={},
        progress_mode=settings.progress_mode,
        note_interval=settings.progress_interval,
        clock=clock,
    )
    deliverer_ref.append(deliverer)
    tools = toolbox or default_toolbox()
    tool_policy = settings.tool_policy(known_tools={t.spec.name for t in tools})
    engine = Engine(
        journal=store,
        model=model or model_for(settings),
        toolbox=tools,
        workflow=default_workflow(),
        settings=EngineSettings(
            max_turns=settings.max_turns,
            max_tokens=settings.max_tokens,
            command_timeout=settings.command_timeout,
            output_limit=settings.output_limit,
            request_ttl=settings.request_ttl,
        ),
        tool_policy=tool_policy,
        faults=faults,
    )
    hub_settings = HubSettings(
        workspace_root=settings.workspace_root.resolve(),
        access=AccessPolicy(approvers=frozenset(settings.approvers)),
        approve_reactions=frozenset(settings.approve_reactions),
        reject_reactions=frozenset(settings.reject_reactions),
        stop_reactions=frozenset(settings.stop_reactions),
        stop_command=settings.stop_command,
    )
    if settings.instance:
        hub_settings = dataclasses.replace(hub_settings, instance=settings.instance)
    hub = Hub(store=store, engine=engine, deliverer=deliverer, settings=hub_settings)
    sweeper = Sweeper(store=store, engine=engine, expire=hub.expire, clock=wall_clock)
    return App(store=store, engine=engine, hub=hub, deliverer=deliverer, sweeper=sweeper)


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
    main = asyncio.current_task()
    if main is not None:  # SIGTERM (a service manager) ends the work like Ctrl-C
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    await app.start()
    try:
        return await console.run(app.hub, settled=app.hub.settled)
    except asyncio.CancelledError:
        return 143  # 128 + SIGTERM; running commands were killed, runs resume at next start
    finally:
        await app.close()


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


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


async def run_platforms(settings: Settings, adapters: list[PlatformAdapter]) -> int:
    """Run the platform adapters until SIGINT or SIGTERM; returns the exit code (0)."""
    app = await build(settings)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    try:
        for adapter in adapters:
            app.add_sender(adapter)
        await app.start()
        for adapter in adapters:
            await adapter.start(app.hub)
            print(f"threadbot: connected to {adapter.platform}", flush=True)
        await stopping.wait()
    finally:
        for adapter in adapters:
            await adapter.close()
        await app.close()
    return 0
