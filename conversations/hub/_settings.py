"""The hub's settings: reaction sets, the stop command and word, leases, shutdown."""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from conversations.access import AccessPolicy
from conversations.channels import ChannelLookup
from conversations.events import PlatformRef
from conversations.files import FileLimits
from conversations.slots import Slots
from conversations.store import ConversationInfo
from core.context import now

DEFAULT_APPROVE = frozenset(
    {"white_check_mark", "heavy_check_mark", "+1", "ballot_box_with_check", "repeat"}
)
DEFAULT_REJECT = frozenset({"x", "-1", "heavy_multiplication_x"})
DEFAULT_STOP = frozenset({"octagonal_sign", "black_square_for_stop"})

WorkflowPriority = Callable[[ConversationInfo, str | None], Awaitable[int]]
"""The priority of the workflow a conversation runs (0: none), given the text of the
request that starts it when the run is a start (it may ask for a workflow by name)."""


@dataclass(frozen=True, kw_only=True)
class HubSettings:
    """Reaction sets (normalized names), the stop command and word, where workspaces go,
    and the caps on shared files."""

    workspace_root: Path
    access: AccessPolicy = field(default_factory=AccessPolicy)
    approve_reactions: frozenset[str] = DEFAULT_APPROVE
    reject_reactions: frozenset[str] = DEFAULT_REJECT
    stop_reactions: frozenset[str] = DEFAULT_STOP
    stop_command: str = "stop"
    stop_word: str = "stop"
    instance: str = field(default_factory=lambda: default_instance())
    """Lease (and delivery claim) owner, :func:`default_instance` by default: a process
    on the same host takes over the leases of a dead process at once; elsewhere they
    lapse after ``lease_ttl``."""
    lease_ttl: float = 60.0
    """Seconds a lease lasts without renewal (renewed every third of it while running)."""
    wakeup_poll: float = 1.0
    """Seconds between two looks at the store for stops and replies meant for the runs
    held here (the fallback of wake-ups: :mod:`conversations.store.wakeups`)."""
    shutdown_grace: float = 20.0
    """Seconds a shutdown lets running steps reach their next commit before cancelling them."""
    channels: ChannelLookup | None = None
    """Each channel's own settings (approvers, per-user limits, the settings told by
    ``/threadbot settings``); None: the same everywhere, from ``access``."""
    clock: Callable[[], datetime] = now
    """The current time, timezone-aware UTC (for the per-hour limits)."""
    on_open: Callable[[str, PlatformRef], None] | None = None
    """Told each conversation a mention opened here and its thread (the bot keeps its
    place's settings for its first run, which then reads nothing for them)."""
    on_resume: Callable[[str], None] = lambda _conversation_id: None
    """Told each conversation whose run goes on here after another process left it (a
    restart, a takeover): a stream of its answer may be left open in its thread
    (:mod:`conversations.outbox._streams`)."""
    files: FileLimits = field(default_factory=FileLimits)
    """Caps on the files a message may share: bytes a file, files a message, seconds a
    download (:mod:`conversations.files`)."""
    slots: Slots | None = None
    """This process's slots, when limits are set: each run waits for its slot first
    (:mod:`conversations.hub._queued`); None: no run waits."""
    workflow_priority: WorkflowPriority | None = None
    """A workflow's own priority, added to its channel's (None: 0)."""
    queued_after: float = 2.0
    """Seconds a run waits for its slot before its thread is told it is queued (a
    shorter wait says nothing)."""
    queued_edit_every: float = 15.0
    """Seconds between two edits of a queued run's message (Slack's ``chat.update`` is
    Tier 3, about 50 a minute per workspace: https://api.slack.com/methods/chat.update)."""


def default_instance() -> str:
    """This process's name as a lease and claim owner: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"
