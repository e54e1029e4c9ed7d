"""Organisations: the layer between the bot's settings and a Slack workspace or Discord guild.

Every Slack workspace and Discord guild belongs to one organisation: the one whose
``[organisations.<name>]`` table lists it (``slack = [...]`` team ids, ``discord = [...]``
guild ids), else :data:`DEFAULT`, the organisation of every workspace and guild no table
lists. A table sets the layered settings of its organisation, as a workspace's table does
(:mod:`bot.layers`)::

    [organisations.acme]                      # acme's two workspaces and its guild
    slack = ["T0123ABCD", "T0456EFGH"]
    discord = ["1198205278617731073"]
    model = "claude-sonnet-5"
    workspace_runs = 20

    [organisations.default]                   # every other workspace and guild
    mutating_tools = false

A value then comes from the channel, its workspace or guild, its organisation, the bot's
settings, the defaults, nearest first; an organisation is a wider layer like a workspace
(it tightens anything, and loosens only what the bot's ``workspaces_may_loosen`` lists), and
its workspaces may loosen its values as far as the same list lets them (docs/architecture.md,
"Settings in layers"). Approvers in an organisation's layer are ids of either platform
(``user:U0123ABCD``, ``group:S0123ABCD``, ``role:<id>``): an id of the other platform never
matches anyone. The console's channels belong to no organisation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, Field

from bot.layer_tables import Layer, SlackTeamId, Snowflake

DEFAULT = "default"
"""The organisation of every workspace and guild no ``[organisations.<name>]`` lists."""

PLATFORMS = ("slack", "discord")
"""The platforms whose workspaces (Slack teams, Discord guilds) belong to organisations."""


def _name(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", value):
        raise ValueError(
            f"{value!r} is not an organisation name (lower-case letters, digits, - and _; "
            "at most 64)"
        )
    return value


OrganisationName = Annotated[str, AfterValidator(_name)]
"""An ``[organisations.<name>]`` key: ``acme``, ``platform-team``."""


class Organisation(Layer):
    """An organisation's layer (``[organisations.<name>]``) and the workspaces and guilds it
    holds; an absent value takes the bot's."""

    slack: list[SlackTeamId] = Field(default_factory=list)
    """The Slack workspaces (team ids) of this organisation."""
    discord: list[Snowflake] = Field(default_factory=list)
    """The Discord guilds (ids) of this organisation."""


def membership_problems(tables: Mapping[str, Organisation]) -> list[str]:
    """Each workspace or guild that two organisations list, said once."""
    seen: dict[tuple[str, str], str] = {}
    problems = []
    for name, table in tables.items():
        for platform in PLATFORMS:
            for member in getattr(table, platform):
                first = seen.setdefault((platform, member), name)
                if first != name:
                    problems.append(
                        f"{platform} {member} is in organisations {first!r} and {name!r}: "
                        "a workspace or guild belongs to one organisation"
                    )
    return problems


class Organisations:
    """Which organisation each workspace and guild belongs to, and each one's layer."""

    def __init__(self, tables: Mapping[str, Organisation]) -> None:
        self._tables = dict(tables)
        self._of = {
            (platform, member): name
            for name, table in self._tables.items()
            for platform in PLATFORMS
            for member in getattr(table, platform)
        }

    def of(self, platform: str, workspace: str) -> str | None:
        """The organisation of ``workspace`` on ``platform``; None for a place of no
        workspace (the console's, or one not named)."""
        if platform not in PLATFORMS or not workspace:
            return None
        return self._of.get((platform, workspace), DEFAULT)

    def layer(self, name: str | None) -> Organisation | None:
        """The layer of the organisation ``name``, None when it has no table."""
        return None if name is None else self._tables.get(name)

    def tables(self) -> Mapping[str, Organisation]:
        """Every organisation's table, by name."""
        return self._tables

    def where(self, platform: str, workspace: str) -> str:
        """Why ``workspace`` is in its organisation: ``listed in organisations.acme``, or
        ``listed in no organisation`` (the default's)."""
        name = self.of(platform, workspace)
        if name is None:
            return "a place of no workspace belongs to no organisation"
        if (platform, workspace) in self._of:
            return f"listed in organisations.{name}"
        return "listed in no organisation"
