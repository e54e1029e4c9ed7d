"""Log records carry the conversation they are about.

The hub sets :data:`conversation` in each conversation's worker (around its jobs: a run, a
decision, a stop) and the deliverer in each conversation's worker; a handler with
:class:`ConversationFilter` adds it to every record as ``record.conversation``
(``-`` outside any conversation), for a format such as
``%(asctime)s %(levelname)s %(name)s [%(conversation)s]: %(message)s``. Context
variables follow asyncio tasks (https://docs.python.org/3/library/contextvars.html),
so concurrent runs never mix their ids.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar

conversation: ContextVar[str] = ContextVar("threadbot_conversation", default="-")
"""The id of the conversation the current task works for, ``-`` if none."""


@contextlib.contextmanager
def about(conversation_id: str) -> Iterator[None]:
    """Within the block, log records name ``conversation_id``."""
    token = conversation.set(conversation_id)
    try:
        yield
    finally:
        conversation.reset(token)


class ConversationFilter(logging.Filter):
    """Adds ``record.conversation`` (the current conversation id, or ``-``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.conversation = conversation.get()
        return True
