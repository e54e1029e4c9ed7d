"""The durable store: one interface per consumer over one database, two backends.

- :mod:`~conversations.store.interfaces`: the protocols (journal, threads, inbox,
  outbox, leases, stop requests, requests, retention) and the :class:`Store`
  that hands them out; who takes which is listed there.
- :mod:`~conversations.store.records`: the plain records every backend returns.
- :mod:`~conversations.store.leases`: the holder of one process's leases (fencing);
  :mod:`~conversations.store.claims`: who delivers a conversation's outbox rows;
  :mod:`~conversations.store.owners`: whether their owner is gone;
  :mod:`~conversations.store.wakeups`: how instances on one database tell each other;
  :mod:`~conversations.store.schedules`: scheduled runs' due times, each recorded once;
  :mod:`~conversations.store.slots`: slots of runs and steps, queued by priority.
- :mod:`~conversations.store.sql`: the SQLAlchemy backend (SQLite by default), its
  tables in :mod:`~conversations.store.schema`, migrated by Alembic
  (:mod:`~conversations.store.migrate`, the scripts in ``conversations/migrations``).
- :mod:`~conversations.store.legacy`: rows stored before requests were typed, read
  at the load edge.
- :mod:`~conversations.store.memory`: the in-memory backend, for fast tests.
- :mod:`~conversations.store.backends`: :func:`open_store` picks one by URL.
"""

from conversations.store.interfaces import (
    Inbox,
    LeaseStore,
    Outbox,
    Renderer,
    Requests,
    Retention,
    SessionRenderer,
    StopRequests,
    Store,
    Threads,
    no_sessions,
)
from conversations.store.records import (
    ConversationInfo,
    DueRequest,
    Lease,
    LeaseState,
    MessageLink,
    OutboxListener,
    OutboxRecord,
    Outgoing,
    PendingSend,
    Pruned,
    RequestMessage,
)
from conversations.store.stops import StopRequest

__all__ = [
    "ConversationInfo",
    "DueRequest",
    "Inbox",
    "Lease",
    "LeaseState",
    "LeaseStore",
    "MessageLink",
    "Outbox",
    "OutboxListener",
    "OutboxRecord",
    "Outgoing",
    "PendingSend",
    "Pruned",
    "Renderer",
    "RequestMessage",
    "Requests",
    "Retention",
    "SessionRenderer",
    "StopRequest",
    "StopRequests",
    "Store",
    "Threads",
    "no_sessions",
]
