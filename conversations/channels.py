"""What the hub and the deliverer need of a channel's settings.

The bot resolves settings in layers (defaults, the bot's, a workspace or guild, a
channel: :mod:`bot.layers`); this package sees only the result for one place, by
its :class:`conversations.events.PlatformRef` (platform, workspace, channel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from conversations.events import PlatformRef

ProgressMode = Literal["replies", "status"]
"""How progress notes show in a thread: each as a reply, or one status message edited."""

BusyMode = Literal["steer", "queue", "interrupt"]
"""What a message sent while a run works becomes: a note the run reads at its next
turn boundary (``steer``), the next run's request (``queue``), or the run's next
instruction, its turn stopped at the next tool boundary (``interrupt``)
(docs/architecture.md, "What a person sees")."""

OverLimit = Literal["queue", "refuse"]
"""What a request over a person's ``user_runs`` gets: queued until one of theirs ends, or
refused (docs/architecture.md, "Limits and priorities")."""


@dataclass(frozen=True, kw_only=True)
class ChannelSettings:
    """One channel's approvers, limits, priority, progress mode and its settings told.

    ``approvers``: entries as :func:`conversations.access.parse_approver` reads them;
    ``user_runs``: runs one person may have at once (``user_runs_over = "queue"``: the
    next waits for a slot), or conversations going, running or waiting, past which a
    new one is refused (``"refuse"``); ``user_mentions_per_hour``: conversations one
    person may start per hour; ``workspace_runs``: runs at once in the channel's
    workspace or guild (None: no limit); ``priority``: the channel's runs' priority in
    the queue for slots (higher first); ``busy_mode``: what a message sent while a
    run works becomes (:data:`BusyMode`); ``explained``: the lines ``/threadbot
    settings`` shows (every setting with the layer it came from; no secret).
    """

    approvers: tuple[str, ...] = ()
    user_runs: int | None = None
    user_runs_over: OverLimit = "queue"
    user_mentions_per_hour: int | None = None
    workspace_runs: int | None = None
    priority: int = 0
    progress_mode: ProgressMode = "replies"
    busy_mode: BusyMode = "steer"
    explained: tuple[str, ...] = ()


ChannelLookup = Callable[[PlatformRef], ChannelSettings]
"""The settings of the channel at a place (pure and quick: called per event)."""
