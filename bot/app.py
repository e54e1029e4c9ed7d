"""Wiring: build the store, the engine, the hub and the adapters, and run them.

Everything is built here and nowhere else: ``bot`` wires all three packages
(docs/architecture.md, "The four packages"). :func:`build` returns an :class:`App`
that tests drive directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from opentelemetry.trace import TracerProvider

from bot.engines import open_engine
from bot.errors import GaveUp
from bot.limits import workflow_priority
from bot.metrics import Metrics
from bot.settings import Settings
from bot.supervise import Backoff, Factory, supervised
from bot.tracing import OFF, Traces, traces_from
from bot.version import installed_version
from conversations.access import AccessPolicy
from conversations.adapter import Sender
from conversations.files import FileFetcher, FileLimits
from conversations.hub import Hub, HubSettings, default_instance
from conversations.inspect.commits import Commits
from conversations.installs import Installs
from conversations.membership import Membership
from conversations.outbox import Clock, Deliverer
from conversations.schedules import Scheduler
from conversations.sealing import Sealer
from conversations.slots import Slots
from conversations.store import Store
from conversations.store.sql.failures import unreachable
from conversations.store.wakeups import Topic
from conversations.sweeper import Sweeper, utc_now
from conversations.texts import PlatformTexts
from core.models.base import Model
from core.run.engine import Engine
from core.runner.protocol import Runner
from core.secrets import Redactor
from core.tools.base import Toolbox

log = logging.getLogger(__name__)


@dataclass
class App:
    """A built threadbot: its background work, the hub to feed, a graceful shutdown.

    Use it as an async context manager (``async with app:``), or call
    :meth:`start` and :meth:`close`.

    :meth:`start` runs the background tasks (deliverer, sweeper, lease renewal, and
    what :meth:`supervise` adds, such as platform connections) in one
    ``asyncio.TaskGroup``, each under :func:`bot.supervise.supervised`; a task that
    gives up sets :attr:`failure` and :meth:`wait_failed` returns it.
    """

    store: Store
    engine: Engine
    hub: Hub
    deliverer: Deliverer
    sweeper: Sweeper
    backoff: Backoff = field(default_factory=Backoff)
    shutdown_grace: float = 20.0
    """Seconds for running steps to reach their next commit, then at most again for delivery."""
    traces: Traces = OFF
    """The export of the runs' spans (:mod:`bot.tracing`), flushed and ended by :meth:`close`."""
    metrics: Metrics | None = None
    """What ``/metrics`` shows (:mod:`bot.metrics`); counted from :func:`build` on."""
    close_runner: Callable[[], Awaitable[None]] | None = None
    """Ends the runner's own resources at :meth:`close` (a Ray runner's actors), after
    the runs were cancelled."""
    close_model: Callable[[], Awaitable[None]] | None = None
    """Closes the model's HTTP client at :meth:`close`, when :func:`build` made the model
    (left open, the client's connections are closed when it is garbage-collected, on
    whatever event loop runs then)."""
    installs: Installs | None = None
    """The app's installs in workspaces (Slack's OAuth flow), their tokens sealed in the
    store and learned by the redactor; None without ``SLACK_CLIENT_ID``. Kept fresh by a
    background task (:meth:`conversations.installs.Installs.keep_fresh`)."""
    redactor: Redactor | None = None
    """The logs' redactor, which knows every secret of the settings and the installs'
    tokens (the run inspector serves nothing unredacted)."""
    commits: Commits = field(default_factory=Commits)
    """Tells the run inspector's live pages of each commit this process's engine makes
    (:mod:`conversations.inspect.commits`)."""
    slots: Slots | None = None
    """This process's slots (:mod:`conversations.slots`); None when no limit is set.
    :meth:`start` drops the rows its name held before it started."""
    failure: GaveUp | None = None
    _background: dict[str, Factory] = field(default_factory=dict)
    _group: asyncio.TaskGroup | None = None
    _supervisor: asyncio.Task[None] | None = None
    _failed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._background.update(
            {
                "deliverer": self.deliverer.run,
                "sweeper": self.sweeper.run,
                "lease renewal": self.hub.leases.keep_renewed,
                "takeover": self.hub.keep_taking_over,
                "wake-ups": self.hub.listening.keep_listening,
                "stop requests": self.hub.stopper.keep_polling,
            }
        )

    def add_sender(self, sender: Sender) -> None:
        """Deliver outbox rows of ``sender.platform`` through ``sender``."""
        self.deliverer.add_sender(sender)

    def add_membership(self, membership: Membership) -> None:
        """Resolve the group approvers of ``membership.platform`` through ``membership``."""
        self.hub.add_membership(membership)

    def add_texts(self, texts: PlatformTexts) -> None:
        """Say ``texts`` (an adapter's help texts) on ``texts.platform``."""
        self.hub.add_texts(texts)

    def add_fetcher(self, fetcher: FileFetcher) -> None:
        """Fetch the files shared on ``fetcher.platform`` through ``fetcher`` (an adapter's)."""
        self.hub.add_fetcher(fetcher)

    def supervise(self, name: str, factory: Factory) -> None:
        """Run ``factory`` as a supervised background task (now, or from :meth:`start`)."""
        self._background[name] = factory
        if self._group is not None:
            self._group.create_task(
                supervised(name, factory, self.backoff, transient=unreachable), name=name
            )

    async def __aenter__(self) -> App:
        """Start (:meth:`start`); the block runs beside the background work."""
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *_exc: object) -> None:
        """Close (:meth:`close`): background work cancelled, the database closed."""
        await self.close()

    async def start(self) -> None:
        """Start the background work, and resume runs a crash left ``running``."""
        started = asyncio.Event()
        self._supervisor = asyncio.create_task(self._run_background(started), name="background")
        await started.wait()
        self.deliverer.wake()
        if self.slots is not None:  # before a run here asks for one
            await self.slots.drop_earlier()
        await self.hub.resume_running()
        await self.hub.resume_unhandled()

    async def _run_background(self, started: asyncio.Event) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                for name, factory in self._background.items():
                    group.create_task(
                        supervised(name, factory, self.backoff, transient=unreachable), name=name
                    )
                started.set()
                await asyncio.Event().wait()  # until close() cancels the group
        except* GaveUp as gave_up:
            failure = gave_up.exceptions[0]
            assert isinstance(failure, GaveUp)
            self.failure = failure
            self._failed.set()
        finally:
            self._group = None
            started.set()

    async def wait_failed(self) -> GaveUp:
        """Return the failure once a background task has given up (waits until then)."""
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    async def shutdown(self) -> None:
        """Stop gracefully: runs reach their next commit, pending messages go out.

        Runs get ``shutdown_grace`` seconds to finish the step they are in (then
        they are cancelled, a running command killed and recorded
        ``interrupted``), and the deliverer as long again for what is pending;
        leases are released as runs end. What is left resumes at the next start. A
        database that cannot be reached meanwhile ends it early, without an error: the
        leases and claims lapse, and what is left goes on as after a crash.
        """
        try:
            await self.hub.shutdown()
            try:
                await asyncio.wait_for(self.deliverer.drain(), self.shutdown_grace)
            except TimeoutError:
                log.warning(
                    "shutting down with messages still pending; they go out at the next start"
                )
            else:  # nothing is being sent: another instance may deliver these at once
                await self.deliverer.release_claims()
        except Exception as exc:
            if not unreachable(exc):
                raise
            log.warning(  # the leases and claims lapse; another instance takes them over
                "shutting down without the database (%s): what is left goes on at the next "
                "start or in another instance",
                exc,
            )

    async def close(self) -> None:
        """Stop work and close the database (in-flight runs resume at the next start); the
        spans still batched are exported."""
        await self.hub.close()
        if self.close_runner is not None:
            await self.close_runner()
        if self.close_model is not None:
            await self.close_model()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        await self.store.close()
        await self.traces.close()


async def build(
    settings: Settings,
    *,
    model: Model | None = None,
    clock: Clock | Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], datetime] = utc_now,
    toolbox: Toolbox | None = None,
    tracer_provider: TracerProvider | None = None,
    redactor: Redactor | None = None,
) -> App:
    """Build and migrate everything for ``settings``; ``model`` and ``toolbox`` override.

    The workflows are loaded and checked first (:meth:`bot.settings.Settings.workflow_library`,
    their tools against the toolbox's and the control tools): raises
    :class:`core.workflows.WorkflowErrors` for a file that does not load, and
    :class:`bot.layers.UnknownWorkflows` for a setting that names a workflow there is not.
    The runs' spans go to ``tracer_provider`` when given (the caller ends it), else to
    the OTLP export the environment configures (:func:`bot.tracing.traces_from`, which
    raises :class:`bot.errors.TracesUnavailable` for one that cannot be given).
    ``redactor``: the logs' (:func:`bot.engines.open_engine`), which then learns the
    tokens of the installs too.
    """
    traces = traces_from() if tracer_provider is None else Traces(provider=tracer_provider)
    instance = settings.instance or default_instance()
    metrics = Metrics(
        version=installed_version(),
        instance=instance,
        working=lambda: hub.working(),
        takeovers=lambda: hub.takeovers,
    )
    parts = await open_engine(
        settings,
        model=model,
        toolbox=toolbox,
        wall_clock=wall_clock,
        traces=traces,
        metrics=metrics,
        instance=instance,
        redactor=redactor,
    )
    store, engine, places, faults = parts.store, parts.engine, parts.places, parts.faults
    slots = parts.slots  # None: no limit set
    deliverer = Deliverer(
        outbox=store.outbox,
        faults=faults,
        senders={},
        progress_mode_of=places.progress_mode,
        note_interval=settings.progress_interval,
        concurrency=settings.delivery_concurrency,
        clock=clock,
        redactor=parts.redactor,
        claims=store.claims,
        owner=instance,
        claim_ttl=settings.lease_ttl,
        claimed_elsewhere=lambda cid: hub.tell(Topic.OUTBOX, cid),  # the holder sends them
        on_sent=metrics.sent,
        on_thread=lambda cid, thread: hub.thread_started(cid, thread),  # a scheduled run's
        streams=parts.streams,  # the answers, streamed while they are written
    )
    store.on_outbox = deliverer.wake
    hub_settings = HubSettings(
        workspace_root=settings.workspace_root,  # absolute: Settings made it so
        access=AccessPolicy(
            approvers=settings.approvers,
            approvers_at=lambda ref: places.channel(ref).approvers,
        ),
        channels=places.channel,
        approve_reactions=frozenset(settings.approve_reactions),
        reject_reactions=frozenset(settings.reject_reactions),
        stop_reactions=frozenset(settings.stop_reactions),
        stop_command=settings.stop_command,
        lease_ttl=settings.lease_ttl,
        wakeup_poll=settings.wakeup_poll,
        shutdown_grace=settings.shutdown_grace,
        on_open=places.know,
        on_resume=parts.streams.resumed,  # a stream of its answer may be left open
        slots=slots,
        workflow_priority=workflow_priority(parts.library, places, store.journal),
        queued_after=settings.queued_after,
        queued_edit_every=settings.queued_edit_every,
        files=FileLimits(
            max_bytes=int(settings.shared_file_mb * 1024 * 1024),
            per_message=settings.shared_files_per_message,
            timeout=settings.shared_file_timeout,
        ),
    )
    hub_settings = dataclasses.replace(hub_settings, instance=instance)
    runner: Runner | None = None
    close_runner: Callable[[], Awaitable[None]] | None = None
    if settings.runner == "ray":
        from bot.ray_runner import RayRunner  # Ray only when runs go there

        try:
            ray_runner = await RayRunner.start(settings)
        except BaseException:
            await store.close()
            raise
        runner, close_runner = ray_runner, ray_runner.close
    hub = Hub(store=store, engine=engine, deliverer=deliverer, settings=hub_settings, runner=runner)
    sweeper = Sweeper(
        requests=store.requests,
        pruning=store.retention,
        engine=engine,
        expire=hub.expire,
        clock=wall_clock,
        retention=timedelta(days=settings.retention_days),
        threads=store.threads,
        workspace_retention=timedelta(days=settings.workspace_retention_days),
        scheduler=Scheduler(
            schedules=[entry.schedule() for entry in settings.schedules],
            store=store.schedules,
            start=hub.open_scheduled,
            instance=instance,
        ),
    )
    installs = None
    if settings.slack_installs:
        installs = Installs(
            store=store.installations,
            states=store.oauth_states,
            sealer=Sealer(settings.sealing_keys()),
            learned=parts.redactor.add,
            poll=settings.wakeup_poll,
        )
    app = App(
        store=store,
        engine=engine,
        hub=hub,
        deliverer=deliverer,
        sweeper=sweeper,
        backoff=Backoff(limit=settings.restart_limit, window=settings.restart_window),
        shutdown_grace=settings.shutdown_grace,
        traces=traces,
        metrics=metrics,
        close_runner=close_runner,
        close_model=parts.close_model,
        installs=installs,
        redactor=parts.redactor,
        commits=parts.commits,
        slots=slots,
    )
    if installs is not None:
        app.supervise("installs", installs.keep_fresh)
    return app
