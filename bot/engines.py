"""The engine built from the settings, with the store it commits to.

One function builds it for the bot process (:func:`bot.app.build`) and for each Ray
actor that hosts runs (:mod:`bot.ray_host`), so a run carried out on an actor uses
the same sandbox, toolbox, workflows, settings layers, prices and output cache as one
carried out in the bot (docs/architecture.md, "Runners").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from adapters.discord.interactions import PLATFORM as DISCORD
from adapters.slack.translate import PLATFORM as SLACK
from bot.layers import ConversationSettings, Layers
from bot.limits import slots_for
from bot.metrics import MeteredModel, Metrics
from bot.sandboxing import caps_said, close_workspaces, confine, fallback_said
from bot.settings import Settings
from bot.tracing import OFF, Traces, place_attributes
from conversations.events import PlatformRef
from conversations.hub import default_instance
from conversations.inspect.commits import Commits
from conversations.outbox import AnswerStreams
from conversations.plan_cards import PlanCardRows
from conversations.render import render_event
from conversations.sessions import SessionRows, Surfaces
from conversations.slots import Slots
from conversations.store import Store
from conversations.store.backends import open_store
from conversations.sweeper import utc_now
from core.faults import Faults
from core.models.base import Model
from core.models.demo import DemoModel
from core.models.scripted import ScriptFileModel
from core.outputs import cache_strategy
from core.run.engine import Engine
from core.run.settings import EngineSettings
from core.run.slots import UNLIMITED
from core.secrets import Redactor
from core.tools.base import Toolbox
from core.tools.command import RunCommand
from core.tools.control import control_tools
from core.tools.outputs import ReadOutput
from core.tools.workspace import EditFile, ListFiles, ReadFile, WriteFile
from core.tools.workspaces import GitWorkspaces
from core.tracing import Tracing
from core.workflows.loading import WorkflowLibrary

log = logging.getLogger(__name__)

SESSIONS = Surfaces(
    (
        PlanCardRows(platforms=frozenset({SLACK, DISCORD})),
        SessionRows(platforms=frozenset({SLACK, DISCORD})),
    )
)
"""The threads whose plan is a card edited as its steps move (docs/architecture.md, "Plan
cards") and whose agent session follows their conversation ("Agent sessions"): Slack's
and Discord's (where the session's status drives the thread's typing indicator)."""


def default_toolbox(run_command: RunCommand | None = None) -> Toolbox:
    """The control tools and the workspace tools (``run_command`` unconfined by default)."""
    return Toolbox(
        [
            *control_tools(),
            ListFiles(),
            ReadFile(),
            WriteFile(),
            EditFile(),
            run_command or RunCommand(),
            ReadOutput(),
        ]
    )


def model_for(settings: Settings) -> Model:
    """Claude when ``ANTHROPIC_API_KEY`` is set, else the built-in demo model."""
    if settings.model_script is not None:
        return ScriptFileModel(str(settings.model_script))
    if settings.anthropic_api_key is None:
        return DemoModel()
    from core.models.anthropic import anthropic_model_from  # the client only when used

    return anthropic_model_from(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        model=settings.model,
    )


def binding_of(store: Store) -> Callable[[str], Awaitable[PlatformRef | None]]:
    """``binding(conversation_id)``: the thread the conversation is bound to, if any."""

    async def binding(conversation_id: str) -> PlatformRef | None:
        found = await store.threads.find(conversation_id)
        return None if found is None else found.binding

    return binding


@dataclass
class EngineParts:
    """What :func:`open_engine` built: the open ``store`` (the caller closes it), the
    ``engine`` over it, the settings ``layers`` and ``places`` (each conversation's and
    channel's settings), the workflow ``library``, the process's ``slots`` (None: no
    limit is set; the caller renews their rows with its leases), ``faults`` and
    ``redactor``, the ``streams`` the engine tells the answers as they are written
    (the deliverer pushes them: :mod:`conversations.outbox._streams`), and ``commits``,
    which tells the run inspector's live pages of each commit the engine makes
    (:mod:`conversations.inspect.commits`). ``close_model`` closes the model's client
    when :func:`open_engine` made the model itself (the caller calls it at its close;
    None: the model was given, or holds no client)."""

    store: Store
    engine: Engine
    layers: Layers
    places: ConversationSettings
    library: WorkflowLibrary
    slots: Slots | None
    faults: Faults
    redactor: Redactor
    streams: AnswerStreams
    commits: Commits
    close_model: Callable[[], Awaitable[None]] | None = None


async def open_engine(
    settings: Settings,
    *,
    model: Model | None = None,
    toolbox: Toolbox | None = None,
    wall_clock: Callable[[], datetime] = utc_now,
    traces: Traces = OFF,
    metrics: Metrics | None = None,
    instance: str | None = None,
    redactor: Redactor | None = None,
) -> EngineParts:
    """Probe the sandbox, load the workflows and layers, open (and migrate) the store and
    build the engine for ``settings``; ``model`` and ``toolbox`` override the settings'.

    The workspace root is made and closed to others (``OSError`` when it cannot be).
    The workflows are loaded and checked first (:meth:`bot.settings.Settings.workflow_library`):
    raises :class:`core.workflows.WorkflowErrors` for a file that does not load, and
    :class:`bot.layers.UnknownWorkflows` for a setting that names a workflow there is not;
    ``sqlalchemy.exc.SQLAlchemyError`` when the database cannot be reached. The model's
    calls are counted in ``metrics`` when given; the runs' spans go to ``traces``. The
    model calls and commands wait for their slots (:func:`bot.limits.slots_for`) as
    ``instance`` (default: this process's ``host:pid``). ``redactor``: the one the logs
    already go through (it learns the installs' tokens), else one of the settings' secrets.
    """
    settings.workspace_root.mkdir(parents=True, exist_ok=True)  # OSError: not usable
    faults = Faults(settings.fault)
    redactor = redactor or Redactor(settings.secrets())
    confinement = await asyncio.to_thread(
        confine, settings.bwrap, settings.command_env, settings.cgroup_root
    )
    if confinement.problem is not None:
        log.warning("%s", fallback_said(confinement.problem))
    if confinement.caps_problem is not None:
        log.warning("%s", caps_said(confinement.caps_problem))
    await asyncio.to_thread(close_workspaces, settings.workspace_root, confinement)
    tools = toolbox or default_toolbox(confinement.run_command)
    known_tools = {t.spec.name for t in tools}
    library = settings.workflow_library(known_tools | {t.spec.name for t in control_tools()})
    layers = settings.layers(
        known_tools=known_tools,
        every_command_asks=confinement.every_command_asks,
        known_workflows=library.names,
    )
    for refused in layers.refusals():  # the wider value holds (bot.loosening)
        log.warning("settings: %s", refused)
    store = await open_store(
        settings.database_url, render=render_event, faults=faults, sessions=SESSIONS
    )
    sheet = {model: price.rates() for model, price in settings.prices.items()}
    prices = await store.usage.sync_prices(sheet, wall_clock())  # a changed price: a new entry
    base = EngineSettings(
        max_tokens=settings.max_tokens,
        output_store_limit=settings.output_store_limit,
        file_text_limit=settings.shared_text_limit,
        prices=prices,
        cgroup_root=settings.cgroup_root,
        running_note_every=settings.running_note_every or None,
    )
    places = ConversationSettings(layers, binding_of(store), base=base)
    slots = slots_for(settings, layers, store, instance or default_instance())
    chosen = model or model_for(settings)
    streams = AnswerStreams(conversation=store.threads.find, redactor=redactor)
    commits = Commits()
    engine = Engine(
        preview=streams,
        slots=slots.steps() if slots is not None else UNLIMITED,
        journal=commits.journal(store.journal),
        model=MeteredModel(chosen, metrics, prices) if metrics is not None else chosen,
        toolbox=tools,
        workflows=library,
        settings=layers.at("", "", "").engine_settings(base),
        settings_for=places.engine,
        channel_spend=store.usage.channel_spend,
        rules=store.approvals,
        outputs=cache_strategy(
            settings.output_cache,
            store=store.outputs,
            ttl=settings.output_cache_ttl,
            clock=wall_clock,
        ),
        faults=faults,
        redactor=redactor,
        workspaces=GitWorkspaces(sandbox=confinement.run_command.sandbox),
        tracing=Tracing(provider=traces.provider, attributes=place_attributes(binding_of(store))),
    )
    return EngineParts(
        store=store,
        engine=engine,
        layers=layers,
        places=places,
        library=library,
        slots=slots,
        faults=faults,
        redactor=redactor,
        streams=streams,
        commits=commits,
        close_model=getattr(chosen, "aclose", None) if model is None else None,
    )
