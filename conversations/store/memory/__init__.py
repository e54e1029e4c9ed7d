"""The in-memory store: every interface of :mod:`conversations.store.interfaces` in plain Python.

Nothing is kept past the process: it serves fast tests (and a quick try of the bot,
``THREADBOT_DATABASE_URL=memory://``). It keeps the SQL store's promises, checked
by the same contract suite (``tests/test_store_contract.py``): compare-and-set
decisions (:class:`core.vocabulary.errors.RequestConflict`), fenced lease commits
(:class:`core.vocabulary.errors.LeaseLost`), a delivery key taken once, outbox ids that grow
and are never reused, outbox states and order, stop requests and retention. One
module per interface, all sharing one :class:`~conversations.store.memory._tables.Tables`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from conversations.store.interfaces import Renderer, SessionRenderer, no_sessions
from conversations.store.memory._tables import Tables
from conversations.store.memory.approvals import MemoryApprovalRules
from conversations.store.memory.audit import MemoryAudit
from conversations.store.memory.claims import MemoryClaims
from conversations.store.memory.feedback import MemoryFeedback
from conversations.store.memory.forks import MemoryForks
from conversations.store.memory.health import MemoryHealth
from conversations.store.memory.inbox import MemoryInbox
from conversations.store.memory.inspection import MemoryInspection
from conversations.store.memory.installations import MemoryInstallations, MemoryOAuthStates
from conversations.store.memory.journal import MemoryJournal
from conversations.store.memory.leases import MemoryLeases
from conversations.store.memory.operator_sessions import MemoryOperatorSessions
from conversations.store.memory.outbox import MemoryOutbox
from conversations.store.memory.outputs import MemoryOutputs
from conversations.store.memory.requests import MemoryRequests
from conversations.store.memory.retention import MemoryRetention
from conversations.store.memory.schedules import MemorySchedules
from conversations.store.memory.slots import MemorySlots
from conversations.store.memory.stops import MemoryStopRequests
from conversations.store.memory.threads import MemoryThreads
from conversations.store.memory.usage import MemoryUsage
from conversations.store.records import OutboxListener
from conversations.store.schema import utcnow
from conversations.store.wakeups import InProcess

__all__ = ["MemoryStore"]


class MemoryStore:
    """A :class:`conversations.store.interfaces.Store` in memory.

    ``render`` turns run events into outbox rows, ``sessions`` a change into its
    thread's session rows (:mod:`conversations.sessions`); ``on_outbox`` is called with
    the outbox rows a write wrote (:data:`~conversations.store.records.OutboxListener`);
    ``clock`` gives the time stored rows carry (timezone-aware
    UTC).
    """

    def __init__(
        self,
        *,
        render: Renderer,
        on_outbox: OutboxListener = lambda _rows: None,
        clock: Callable[[], datetime] = utcnow,
        sessions: SessionRenderer = no_sessions,
    ) -> None:
        self._tables = Tables(render=render, clock=clock, on_outbox=on_outbox, sessions=sessions)
        self.journal = MemoryJournal(self._tables)
        self.threads = MemoryThreads(self._tables)
        self.inbox = MemoryInbox(self._tables)
        self.outbox = MemoryOutbox(self._tables)
        self.leases = MemoryLeases(self._tables)
        self.claims = MemoryClaims(self._tables)
        self.wakeups = InProcess()
        self.stops = MemoryStopRequests(self._tables)
        self.requests = MemoryRequests(self._tables)
        self.retention = MemoryRetention(self._tables)
        self.usage = MemoryUsage(self._tables)
        self.outputs = MemoryOutputs(self._tables)
        self.schedules = MemorySchedules(self._tables)
        self.forks = MemoryForks(self._tables)
        self.slots = MemorySlots(self._tables)
        self.health = MemoryHealth(self._tables)
        self.feedback = MemoryFeedback(self._tables)
        self.audit = MemoryAudit(self._tables)
        self.installations = MemoryInstallations(self._tables)
        self.oauth_states = MemoryOAuthStates(self._tables)
        self.operator_sessions = MemoryOperatorSessions(self._tables)
        self.approvals = MemoryApprovalRules(self._tables)
        self.inspection = MemoryInspection(self._tables)

    @property
    def on_outbox(self) -> OutboxListener:
        """Called with the outbox rows a write wrote (the deliverer queues them)."""
        return self._tables.on_outbox

    @on_outbox.setter
    def on_outbox(self, callback: OutboxListener) -> None:
        self._tables.on_outbox = callback

    async def close(self) -> None:
        """Nothing to release: the store lives as long as the object."""
