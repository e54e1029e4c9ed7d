"""Which loosenings a settings layer may make, and why one is refused.

The layers, widest first: the shipped defaults, the bot's settings (environment or
``threadbot.toml`` top level), a Slack workspace or Discord guild, one channel of it
(docs/architecture.md, Settings in layers). Every layered setting has a tighter
direction (:data:`bot.layer_tables.DIRECTIONS`), and one rule holds for all of them:

- the bot's settings may loosen anything (they replace the defaults);
- a workspace, guild or channel may tighten anything, and loosen a setting only where
  a wider layer lists it: the bot's ``workspaces_may_loosen`` (default
  ``["approvers"]``) for workspaces and guilds; the bot's ``channels_may_loosen``, or
  the workspace's or guild's own ``channels_may_loosen``, for channels;
- a workspace or guild passes on only what it may loosen itself: its
  ``channels_may_loosen`` lets a channel undo the workspace's own tightening, and go
  looser than the bot's settings only where the bot's ``workspaces_may_loosen`` lists
  the setting too (else the list would hand a channel what the workspace was refused).

A refused loosening does not stop the bot: the wider layer's value holds, the refusal
is logged once at start, and ``threadbot settings explain`` and ``/threadbot settings``
show it beside the setting (:class:`Refusals`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.layer_tables import DIRECTIONS, Direction, Layer
from conversations.access import Approver, parse_approver


def looser(name: str, value: Any, than: Any) -> bool:
    """Whether ``value`` of the setting ``name`` is looser than ``than`` (the value in
    force from the wider layers). Equal values are not looser; a free setting never is.

    Raises ``KeyError`` for a name without a direction.
    """
    match DIRECTIONS[name]:
        case Direction.LOWER:
            return than is not None and (value is None or value > than)
        case Direction.SUBSET:
            return not _people(value) <= _people(than)
        case Direction.SUPERSET:
            return not set(value) >= set(than)
        case Direction.FEWER:
            return not set(value) <= set(than)
        case Direction.TRUE_IS_TIGHTER:
            return bool(than) and not value
        case Direction.FALSE_IS_TIGHTER:
            return not than and bool(value)
        case Direction.EACH_LOOSENS:
            return bool(value)
        case Direction.FREE:
            return False


def _people(entries: Iterable[str]) -> set[Approver]:
    """Approver entries as what they name (``U0123ABCD`` is ``user:U0123ABCD``)."""
    return {parse_approver(entry) for entry in entries}


@dataclass(frozen=True)
class Step:
    """One layer nearer than the bot's settings on the way to a place (widest first).

    ``label``: ``slack workspace T0123``, ``slack channel C0456``; ``channel``: whether
    it is a channel's layer; for a channel, ``granter`` is its workspace's or guild's
    label and ``passed_on`` that layer's ``channels_may_loosen``.
    """

    label: str
    layer: Layer
    channel: bool = False
    granter: str = ""
    passed_on: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Grants:
    """What the bot's settings let nearer layers loosen: ``workspaces`` (its
    ``workspaces_may_loosen``) and ``channels`` (its ``channels_may_loosen``)."""

    workspaces: frozenset[str] = frozenset({"approvers"})
    channels: frozenset[str] = frozenset()

    def refused(self, name: str, value: Any, *, wider: Any, bot: Any, step: Step) -> str | None:
        """None when ``step``'s layer may set ``value`` over ``wider`` (the value in force
        from the wider layers); else how a wider layer may allow it, e.g. ``a wider
        layer may allow it with channels_may_loosen = ["ask_commands"]``. ``bot``: the
        value in force at the bot's settings (how far a workspace's grant reaches)."""
        if not looser(name, value, wider):
            return None
        listed = f'["{name}"]'
        if not step.channel:
            if name in self.workspaces:
                return None
            return f"the bot's settings may allow it with workspaces_may_loosen = {listed}"
        if name in self.channels:
            return None
        if name not in step.passed_on:
            return f"a wider layer may allow it with channels_may_loosen = {listed}"
        if name in self.workspaces or not looser(name, value, bot):
            return None
        return (
            f"{step.granter} lists it in channels_may_loosen, but a workspace or guild passes "
            f"on only what it may loosen itself; the bot's settings may allow it with "
            f"channels_may_loosen = {listed} (or workspaces_may_loosen = {listed})"
        )


@dataclass
class Refusals:
    """The loosenings refused at one place, by setting (``allow_rules`` for the allow
    rules), each as people read it: ``slack channel C0456 sets ask_commands = [] (looser
    than the default list, from defaults): refused; a wider layer may allow it with
    channels_may_loosen = ["ask_commands"]``."""

    by_name: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, said: str) -> None:
        """Record ``said`` (the whole sentence) against the setting ``name``."""
        self.by_name.setdefault(name, []).append(said)

    def key(self, name: str, *, step: Step, shown: str, wider: str, source: str, hint: str) -> None:
        """A refused value of ``name``: ``shown`` by ``step``, over ``wider`` from ``source``."""
        self.add(
            name,
            f"{step.label} sets {name} = {shown} (looser than {wider}, from {source}): "
            f"refused; {hint}",
        )

    def all(self) -> list[str]:
        """Every refusal, in the order of the settings."""
        return [said for lines in self.by_name.values() for said in lines]
