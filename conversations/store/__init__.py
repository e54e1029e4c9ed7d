"""The durable store: SQLAlchemy 2 async tables, the ``Journal`` implementation, the outbox.

SQLite (through aiosqlite, WAL mode) is the embedded default; the schema is
created and upgraded by Alembic migrations (``conversations/migrations``).
"""

from conversations.store.store import (
    ConversationInfo,
    DueRequest,
    MessageLink,
    Outgoing,
    PendingSend,
    RequestMessage,
    Store,
)

__all__ = [
    "ConversationInfo",
    "DueRequest",
    "MessageLink",
    "Outgoing",
    "PendingSend",
    "RequestMessage",
    "Store",
]
