"""Large tool outputs: the model reads a head-and-tail preview and an id, and pages on.

The store / retrieve / preview strategies for large tool outputs (docs/architecture.md,
"Tools and the sandbox"). A tool output longer than the run's ``output_limit`` is
stored whole (:meth:`OutputCache.store`, an id back); the tool result the model
reads is :func:`preview_text`: its head and its tail with a line between that
names the id, the length and how to read on; the ``read_output`` tool
(:mod:`core.tools.outputs`) returns any page of it by offset. The preview is what is
journaled, so a resume sends the same context; the whole output stays where the
strategy keeps it. The strategies, by the name :func:`cache_strategy` builds them from:

- ``persistent`` (:class:`PersistentOutputs`, the default): in the store, through
  :class:`OutputStore` (kept as long as the journal; a restart reads it back);
- ``in_memory`` (:class:`InMemoryOutputs`): in this process, each output for a time
  to live; one that expired or was lost to a restart is :class:`Gone`, which
  ``read_output`` tells the model in words, not as an error;
- ``none``: no cache, no object (``None``): the tool cuts its output to head and
  tail and no id is given.

Modules::

    base.py        the OutputCache protocol, Gone, the OutputStore protocol, the preview
    persistent.py  PersistentOutputs: in the store
    memory.py      InMemoryOutputs: in memory, with a time to live
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal, get_args

from core.context import WALL
from core.outputs.base import (
    NOTE_ROOM,
    OUTPUT_ID_PREFIX,
    Gone,
    OutputCache,
    OutputStore,
    look_up,
    named_in,
    new_output_id,
    preview_text,
)
from core.outputs.memory import InMemoryOutputs
from core.outputs.persistent import PersistentOutputs

__all__ = [
    "CACHE_NAMES",
    "NOTE_ROOM",
    "OUTPUT_ID_PREFIX",
    "CacheName",
    "Gone",
    "InMemoryOutputs",
    "OutputCache",
    "OutputStore",
    "PersistentOutputs",
    "cache_strategy",
    "look_up",
    "named_in",
    "new_output_id",
    "preview_text",
]

CacheName = Literal["persistent", "in_memory", "none"]
"""The names of the cache strategies (the ``output_cache`` setting)."""
CACHE_NAMES: tuple[str, ...] = get_args(CacheName)

DEFAULT_TTL = 3600.0
"""Seconds an in-memory output is kept by default."""


def cache_strategy(
    name: str,
    *,
    store: OutputStore | None = None,
    ttl: float = DEFAULT_TTL,
    clock: Callable[[], datetime] = WALL.clock,
) -> OutputCache | None:
    """The cache strategy called ``name`` (:data:`CacheName`); None for ``none``.

    ``store``: where ``persistent`` keeps outputs (required for it); ``ttl``: seconds
    an ``in_memory`` output lives, by ``clock`` (the run context's clock). Each call
    builds a new cache: two ``in_memory`` ones share nothing. Raises ``ValueError``
    for an unknown name, or ``persistent`` without a store.
    """
    match name:
        case "persistent":
            if store is None:
                raise ValueError("the persistent output cache needs a store")
            return PersistentOutputs(store)
        case "in_memory":
            return InMemoryOutputs(ttl, clock)
        case "none":
            return None
    raise ValueError(f"no output cache is called {name!r} (one of {', '.join(CACHE_NAMES)})")
