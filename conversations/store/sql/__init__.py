"""The SQL store: every interface of :mod:`conversations.store.interfaces` on SQLAlchemy 2.

SQLite (through aiosqlite, WAL mode) is the embedded default; the schema
(:mod:`conversations.store.schema`) is created and upgraded by Alembic migrations
(``conversations/migrations``, :mod:`conversations.store.migrate`). One module per
interface, all sharing one :class:`~conversations.store.sql.database.Database`
(its engine, and one write lock and transaction helper):

- ``database``: the engine (SQLite pragmas, ``BEGIN IMMEDIATE``), write transactions
- ``journal``: core's ``Journal`` (load, commit: the one transaction of a step)
- ``one_statement``: on PostgreSQL, a run's commit as one statement
- ``threads``: conversations and their thread bindings
- ``inbox``: deliveries (dedupe keys, the durable inbox)
- ``outbox``: outbound rows
- ``leases``: fenced leases
- ``claims``: delivery claims
- ``wakeups``: ``NOTIFY``/``LISTEN`` between instances on PostgreSQL
- ``stops``: stop requests
- ``requests``: pending requests' state, reminders, message links
- ``retention``: pruning
- ``usage``: price entries, model calls, spend and reports
- ``outputs``: large tool outputs kept whole
- ``schedules``: scheduled runs' due times, each recorded once
- ``slots``: slots of runs and steps, granted by a pass under a lock
- ``health``: reachability, schema revision and levels, for an operator
- ``feedback``: people's 👍 / 👎 on a conversation's answers, one row per person
- ``audit``: every decision and refused attempt (the journal writes a decision's row)
- ``installations``: the app's installs per workspace (tokens sealed), and OAuth states
- ``approvals``: approvals remembered for a run or a channel, listed and revoked
- ``inspection``: the run inspector's list of conversations, a page per statement
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from conversations.store.interfaces import Renderer, SessionRenderer, no_sessions
from conversations.store.records import OutboxListener
from conversations.store.sql.approvals import SqlApprovalRules
from conversations.store.sql.audit import SqlAudit
from conversations.store.sql.claims import SqlClaims
from conversations.store.sql.database import BEGIN_IMMEDIATE, Database, create_engine
from conversations.store.sql.feedback import SqlFeedback
from conversations.store.sql.forks import SqlForks
from conversations.store.sql.health import SqlHealth
from conversations.store.sql.inbox import SqlInbox
from conversations.store.sql.inspection import SqlInspection
from conversations.store.sql.installations import SqlInstallations, SqlOAuthStates
from conversations.store.sql.journal import SqlJournal
from conversations.store.sql.leases import SqlLeases
from conversations.store.sql.operator_sessions import SqlOperatorSessions
from conversations.store.sql.outbox import SqlOutbox
from conversations.store.sql.outputs import SqlOutputs
from conversations.store.sql.requests import SqlRequests
from conversations.store.sql.retention import SqlRetention
from conversations.store.sql.schedules import SqlSchedules
from conversations.store.sql.slots import SqlSlots
from conversations.store.sql.stops import SqlStopRequests
from conversations.store.sql.threads import SqlThreads
from conversations.store.sql.usage import SqlUsage
from conversations.store.sql.wakeups import PgWakeups
from conversations.store.wakeups import Unheard, Wakeups

__all__ = ["BEGIN_IMMEDIATE", "SqlStore", "create_engine"]


class SqlStore:
    """A :class:`conversations.store.interfaces.Store` over the database behind ``engine``.

    The schema must be at the newest revision (:func:`conversations.store.migrate.upgrade`).
    ``render`` turns run events into outbox rows, ``sessions`` a change into its
    thread's session rows (:mod:`conversations.sessions`); ``on_outbox`` is called with
    the outbox rows a commit wrote (:data:`~conversations.store.records.OutboxListener`).
    ``engine`` is there for SQL-level tests and tools.
    """

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        render: Renderer,
        on_outbox: OutboxListener = lambda _rows: None,
        sessions: SessionRenderer = no_sessions,
    ) -> None:
        self._db = Database(engine)
        self._db.on_outbox = on_outbox
        self.engine = engine
        self.journal = SqlJournal(self._db, render, sessions)
        self.threads = SqlThreads(self._db)
        self.inbox = SqlInbox(self._db)
        self.outbox = SqlOutbox(self._db)
        self.leases = SqlLeases(self._db)
        self.claims = SqlClaims(self._db)
        self.wakeups: Wakeups = (
            PgWakeups(self._db) if engine.dialect.name == "postgresql" else Unheard()
        )
        self.stops = SqlStopRequests(self._db)
        self.requests = SqlRequests(self._db)
        self.retention = SqlRetention(self._db)
        self.usage = SqlUsage(self._db)
        self.outputs = SqlOutputs(self._db)
        self.schedules = SqlSchedules(self._db)
        self.forks = SqlForks(self._db)
        self.slots = SqlSlots(self._db)
        self.health = SqlHealth(self._db)
        self.feedback = SqlFeedback(self._db)
        self.audit = SqlAudit(self._db)
        self.installations = SqlInstallations(self._db)
        self.oauth_states = SqlOAuthStates(self._db)
        self.operator_sessions = SqlOperatorSessions(self._db)
        self.approvals = SqlApprovalRules(self._db)
        self.inspection = SqlInspection(self._db)

    @property
    def on_outbox(self) -> OutboxListener:
        """Called with the outbox rows a write wrote, once it committed."""
        return self._db.on_outbox

    @on_outbox.setter
    def on_outbox(self, callback: OutboxListener) -> None:
        self._db.on_outbox = callback

    async def close(self) -> None:
        """Close every pooled connection."""
        await self._db.close()
