"""One run: what it knows (:class:`Run`), passed explicitly to everything it does.

A run is one call of an engine entry point (:class:`core.run.engine.Engine`): it
loads its conversation once, keeps the snapshot in memory while it holds the
lease, and folds each change it commits into it (:mod:`core.run.live`,
:func:`core.vocabulary.fold.apply_change`). What it uses (the journal, the model,
the toolbox...) is apart, in :class:`core.run.deps.RunDeps`: the split of
pydantic-ai's ``GraphAgentState`` and ``GraphAgentDeps``. Nothing of a run is kept
anywhere else: no context variable, no dict of conversations on a long-lived
object; a run that ends takes its history and totals with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from core.context import WALL, RunContext
from core.requests.common import Opening
from core.run.history import History
from core.run.scope import Scope
from core.run.settings import EngineSettings
from core.run.stats import RequestTotals
from core.tracing import NO_SPAN, RunSpan
from core.vocabulary.journal import Change, Committed
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows import Workflow, default_workflow
from core.workflows.model import parse_duration

Watch = Callable[[Change], None]
"""Told each change a run committed, after the store took it (:attr:`Run.watch`)."""


@dataclass
class Gathering:
    """Results of ``size`` calls run side by side, gathered for one commit: each change
    with the future its caller awaits (:func:`core.run.live.gathered`); ``order``
    places each call by its ``tool_use`` id (the model's order: the commit journals
    the results in it, whichever finished first)."""

    size: int
    order: dict[str, int] = field(default_factory=dict)
    changes: list[tuple[Change, asyncio.Future[Committed]]] = field(default_factory=list)


@dataclass(frozen=True)
class Handover:
    """A conversation as a run's last commit left it, handed to the run that goes on next.

    ``snapshot``: the run's snapshot after that commit; ``at``: the commit's time
    (UTC; the store keeps it as the conversation's last change). The next run may
    start from ``snapshot`` instead of reading the conversation back, but only when
    the store says the conversation has not changed since ``at`` (the hub checks it
    as it takes the lease: :class:`conversations.store.leases.Leases`); otherwise
    it loads, as every run may.
    """

    snapshot: ConversationSnapshot
    at: datetime


@dataclass(kw_only=True)
class Run:
    """What one run of a conversation knows.

    ``snapshot``: the conversation as the run last committed it (loaded at the run's
    start; None after a commit whose outcome is unknown dropped it: read it back with
    :func:`core.run.live.current`). ``settings``: the conversation's, asked once at
    the run's start. ``run_id`` names the run (its model calls are stored with it),
    ``entry`` the entry point that began it; ``span`` is its trace span, ``context``
    the clock and ids of its decisions. ``history`` builds the model's messages as the
    journal grows, ``totals`` the request's totals for the notes' status line;
    ``commits`` lets one commit through at a time (the turn's concurrent tool calls
    share the run); ``gathering`` holds the results of calls run side by side until
    they go as one commit (:func:`core.run.live.gathered`); ``committed_at`` is the
    time of its last commit; ``scope`` is the scope it works in now (its root scope,
    or one nested in it while a composed step goes on there: :mod:`core.run.scope`),
    whose strategies its steps use; ``workflow`` is the one the conversation runs (as
    journaled: :mod:`core.run.workflow`); ``watch`` is told each change the run
    committed, once the store took it (a runner streams them: :mod:`core.runner`).
    """

    conversation_id: str
    snapshot: ConversationSnapshot | None
    settings: EngineSettings = field(default_factory=EngineSettings)
    run_id: str = ""
    entry: str = ""
    span: RunSpan = NO_SPAN
    context: RunContext = WALL
    history: History = field(default_factory=History)
    totals: RequestTotals = field(default_factory=RequestTotals)
    commits: asyncio.Lock = field(default_factory=asyncio.Lock)
    gathering: Gathering | None = None
    committed_at: datetime | None = None
    scope: Scope = field(default_factory=Scope)
    workflow: Workflow = field(default_factory=default_workflow)
    watch: Watch | None = None

    def handover(self) -> Handover | None:
        """The run's snapshot as its last commit left it, for the run that goes on next;
        None when it committed nothing or a failed commit dropped the snapshot."""
        if self.snapshot is None or self.committed_at is None:
            return None
        return Handover(snapshot=self.snapshot, at=self.committed_at)

    @property
    def snap(self) -> ConversationSnapshot:
        """The snapshot; raises ``LookupError`` when a failed commit dropped it (a bug:
        the code after a failed commit reads it back with :func:`core.run.live.current`)."""
        if self.snapshot is None:
            raise LookupError(f"conversation {self.conversation_id}: the snapshot was dropped")
        return self.snapshot

    @property
    def opening(self) -> Opening:
        """Ids and times of the requests the run opens (their lifetime: the workflow
        state's ``timeout`` where it has one, else the settings' ``request_ttl``)."""
        ttl = self.settings.request_ttl
        if self.snapshot is not None:
            timeout = self.workflow.state(self.snapshot.position).timeout
            if timeout:
                ttl = parse_duration(timeout).total_seconds()
        return Opening(context=self.context, ttl=ttl)
