"""Settings in layers: defaults, the bot's settings, a workspace or guild, a channel.

A team gives a Slack workspace (its ``team_id``), a Discord guild, or one channel
of either its own values in ``threadbot.toml``::

    model = "claude-sonnet-5"                 # the bot's settings

    [slack.T0123]                             # a Slack workspace
    approvers = ["group:S0LEADS"]

    [slack.T0123.channels.C0456]              # one channel of it
    model = "claude-opus-5-5"
    instructions = "This channel deploys the web app; say which commit you test."

    [[slack.T0123.channels.C0456.policy.rules]]
    tool = "run_command"
    command_prefix = "make test"
    decision = "allow"
    network = true

    [discord.1198206788567171079.channels.1200000000000000001]
    progress_mode = "status"

A value comes from the nearest layer that sets it: the channel, then its
workspace or guild, then the bot's settings (environment or ``threadbot.toml``),
then the defaults. Tool policy rules are the exception: every layer's rules are
checked, and a ``deny`` from any layer wins, then an ``ask`` from any layer
(:mod:`core.policy.policy`). :meth:`Layers.at` resolves a place and says, for each
value, which layer it came from (``threadbot settings explain``, the in-chat
``/threadbot settings``). The tables themselves: :mod:`bot.layer_tables`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from bot.layer_tables import LAYERED, DiscordGuild, Layer, SlackWorkspace, micro_usd
from conversations.channels import ChannelSettings, ProgressMode
from conversations.events import PlatformRef
from core.policy.policy import DEFAULT_ASK_COMMANDS, RuleLayer, ToolPolicy
from core.pricing import Budgets, Limit
from core.run.settings import EngineSettings
from core.tools.workspaces import without_credentials


@dataclass(frozen=True)
class Sourced:
    """One effective value and the layer it came from (``defaults``, ``bot settings
    (THREADBOT_MODEL)``, ``slack workspace T0123``, ``slack channel C0456`` ...)."""

    value: Any
    layer: str
    nearer: bool = False
    """Set by a workspace, guild or channel layer (not the bot's settings or defaults)."""


@dataclass(frozen=True)
class Effective:
    """The settings that apply at one place, each with its layer (see :meth:`Layers.at`)."""

    values: Mapping[str, Sourced]
    policy_sources: Mapping[str, str]
    """The layer of the policy's ``ask_commands`` and ``mutating_needs_plan``."""
    policy: ToolPolicy
    """The bot's policy with the nearer layers' rules (channel first) and ``mutating_tools``."""

    def __getitem__(self, name: str) -> Any:
        return self.values[name].value

    def engine_settings(self, base: EngineSettings) -> EngineSettings:
        """``base`` with this place's model, instructions, policy, caps and request lifetime."""
        return dataclasses.replace(
            base,
            model=self["model"] if self.values["model"].nearer else None,  # else the model's
            fallback_models=tuple(self["fallback_models"]),
            instructions=self["instructions"],
            tool_policy=self.policy,
            command_timeout=self["command_timeout"],
            command_cpu_seconds=self["command_cpu_seconds"],
            command_memory_mb=self["command_memory_mb"],
            command_processes=self["command_processes"],
            output_limit=self["output_limit"],
            request_ttl=self["request_ttl"],
            git_repo=self["git_repo"],
            context_window=self["context_window"],
            compact_at=self["compact_at"],
            budgets=Budgets(
                conversation=_limit(
                    self["conversation_budget_tokens"], self["conversation_budget_usd"]
                ),
                channel_day=_limit(
                    self["channel_daily_budget_tokens"], self["channel_daily_budget_usd"]
                ),
            ),
        )

    @functools.cached_property
    def channel_settings(self) -> ChannelSettings:
        """What the hub and the deliverer need of these settings."""
        return ChannelSettings(
            approvers=tuple(self["approvers"]),
            user_runs=self["user_runs"],
            user_mentions_per_hour=self["user_mentions_per_hour"],
            progress_mode=self["progress_mode"],
            explained=("Settings here, each with the layer it came from:", *self.explain()),
        )

    def explain(self) -> list[str]:
        """One line per setting, ``name = value  (layer)``; no secret is among them
        (a password in a ``git_repo`` URL is hidden)."""
        lines = []
        for name in LAYERED:
            sourced = self.values[name]
            lines.append(f"{name} = {_shown(name, sourced.value)}  ({sourced.layer})")
        rules = [
            f"  {rule.label()}  ({layer.name})"
            for layer in (
                *self.policy.layers,
                RuleLayer(name="bot settings", rules=self.policy.rules),
            )
            for rule in layer.rules
        ]
        asks = self.policy.ask_commands
        shown = "the default list" if asks == DEFAULT_ASK_COMMANDS else repr(list(asks))
        lines.append(f"ask_commands = {shown}  ({self.policy_sources['ask_commands']})")
        needs_plan = self.policy.mutating_needs_plan
        where = self.policy_sources["mutating_needs_plan"]
        lines.append(f"mutating_needs_plan = {needs_plan!r}  ({where})")
        lines.append("policy rules, nearest layer first (a deny from any layer wins, then an ask):")
        lines += rules or ["  none"]
        return lines


def repo_shown(url: str) -> str:
    """A repository URL as it may be shown: without the credentials that
    :func:`core.tools.workspaces.without_credentials` takes out, marked ``***`` where
    they were."""
    plain = without_credentials(url)
    if plain == url:
        return url
    scheme, sep, rest = plain.partition("://")
    had_userinfo = "@" in url.partition("?")[0].partition("://")[2].partition("/")[0]
    shown = f"{scheme}://***@{rest}" if sep and had_userinfo else plain
    return f"{shown}?***" if "?" in url and "?" not in shown else shown


def _limit(tokens: int | None, dollars: float | None) -> Limit:
    """A budget from its settings: tokens, and dollars kept as micro-dollars."""
    return Limit(tokens=tokens, micro_usd=None if dollars is None else micro_usd(dollars))


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "(none)"
    if name == "git_repo" and isinstance(value, str):
        value = repo_shown(value)
    if name == "instructions" and isinstance(value, str):
        text = " ".join(value.split())
        return repr(text if len(text) <= 80 else text[:79] + "…")
    return repr(value)


class ConversationSettings:
    """The effective settings of each conversation, by its id, from where it lives.

    ``binding``: the conversation's place (its :class:`PlatformRef`), or None for an
    unknown id (a store read). Places are kept for the last ``keep`` conversations
    asked about (a conversation never moves): a few hundred bytes each, bounded, so
    that conversations waiting on a person hold no memory here beyond them.
    """

    def __init__(
        self,
        layers: Layers,
        binding: Callable[[str], Awaitable[PlatformRef | None]],
        *,
        base: EngineSettings,
        keep: int = 64,
    ) -> None:
        self._layers = layers
        self._binding = binding
        self._base = base
        self._keep = keep
        self._known: OrderedDict[str, Effective] = OrderedDict()

    def at(self, ref: PlatformRef) -> Effective:
        """The settings at ``ref``'s place."""
        return self._layers.at(ref.platform, ref.workspace, ref.home)

    def channel(self, ref: PlatformRef) -> ChannelSettings:
        """The settings of ``ref``'s channel (a :data:`conversations.channels.ChannelLookup`)."""
        return self.at(ref).channel_settings

    async def of(self, conversation_id: str) -> Effective:
        """The settings of a conversation; the bot's own for an unknown id."""
        found = self._known.get(conversation_id)
        if found is None:
            ref = await self._binding(conversation_id)
            found = self._layers.at("", "", "") if ref is None else self.at(ref)
            self._known[conversation_id] = found  # shared by every conversation of the place
            if len(self._known) > self._keep:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(conversation_id)
        return found

    async def engine(self, conversation_id: str) -> EngineSettings:
        """The engine settings of a conversation (:data:`core.run.settings.SettingsLookup`)."""
        return (await self.of(conversation_id)).engine_settings(self._base)

    async def progress_mode(self, conversation_id: str) -> ProgressMode:
        """The progress mode of a conversation (:data:`conversations.outbox.ModeLookup`)."""
        mode: ProgressMode = (await self.of(conversation_id))["progress_mode"]
        return mode


class Layers:
    """Resolves the layers of a :class:`bot.settings.Settings` for a place.

    ``bot``: the bot layer's values by name (the settings' fields); ``set_by``: for
    each name the bot's settings set, where (``THREADBOT_MODEL``, ``threadbot.toml``);
    names absent there come from the defaults. ``slack`` and ``discord``: the
    workspace and guild layers by id. ``bot_policy``: the bot's ``[policy]`` as built.
    """

    def __init__(
        self,
        *,
        bot: Mapping[str, Any],
        set_by: Mapping[str, str],
        slack: Mapping[str, SlackWorkspace],
        discord: Mapping[str, DiscordGuild],
        bot_policy: ToolPolicy,
        known_tools: Collection[str] | None = None,
    ) -> None:
        self._bot = bot
        self._set_by = set_by
        self._workspaces: dict[str, Mapping[str, Layer]] = {"slack": slack, "discord": discord}
        self._bot_policy = bot_policy
        self._known = known_tools
        self._cache: dict[tuple[str, str, str], Effective] = {}

    def check_tools(self) -> None:
        """Build every layer's policy; raises ``ValueError`` with the table's dotted path
        for a rule about an unknown tool."""
        for platform, workspace, channel, layer in self._all():
            if layer.policy is not None:
                ToolPolicy.from_toml_table(
                    layer.policy, self._known, where=_path(platform, workspace, channel, "policy")
                )

    def at(self, platform: str, workspace: str, channel: str) -> Effective:
        """The effective settings in ``channel`` of ``workspace`` on ``platform``.

        Cached per layer chain, not per place: every channel without layers of its
        own shares one :class:`Effective`, so memory grows with the layers, not the
        channels seen.
        """
        top = self._workspaces.get(platform, {}).get(workspace)
        if top is None:
            key = (platform, "", "")
        elif channel in getattr(top, "channels", {}):
            key = (platform, workspace, channel)
        else:
            key = (platform, workspace, "")
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._resolve(*key)
        return found

    def _resolve(self, platform: str, workspace: str, channel: str) -> Effective:
        chain = self._chain(platform, workspace, channel)
        values = {}
        for name in LAYERED:
            values[name] = next(
                (
                    Sourced(getattr(layer, name), label, nearer=True)
                    for label, layer in chain
                    if getattr(layer, name) is not None
                ),
                Sourced(self._bot[name], self._bot_label(name)),
            )
        rule_layers = []
        policy = self._bot_policy
        sources = {
            key: self._bot_label("policy") if key in policy.model_fields_set else "defaults"
            for key in ("ask_commands", "mutating_needs_plan")
        }
        taken: set[str] = set()
        for label, layer in chain:
            if layer.policy is None:
                continue
            own = ToolPolicy.from_toml_table(layer.policy, self._known)
            rule_layers.append(RuleLayer(name=label, rules=own.rules))
            for key in ("ask_commands", "mutating_needs_plan"):
                if key in layer.policy and key not in taken:  # the nearest layer's
                    taken.add(key)
                    sources[key] = label
                    policy = policy.model_copy(update={key: getattr(own, key)})
        policy = policy.with_layers(rule_layers, mutating_tools=values["mutating_tools"].value)
        return Effective(
            values=values,
            policy_sources=sources,
            policy=policy,
        )

    def _chain(self, platform: str, workspace: str, channel: str) -> list[tuple[str, Layer]]:
        """The layers above the bot's at a place, nearest first, with their labels."""
        top = self._workspaces.get(platform, {}).get(workspace)
        if top is None:
            return []
        kind = "guild" if platform == "discord" else "workspace"
        chain: list[tuple[str, Layer]] = []
        inner = getattr(top, "channels", {}).get(channel)
        if inner is not None:
            chain.append((f"{platform} channel {channel}", inner))
        chain.append((f"{platform} {kind} {workspace}", top))
        return chain

    def _bot_label(self, name: str) -> str:
        where = self._set_by.get(name)
        return "defaults" if where is None else f"bot settings ({where})"

    def _all(self) -> list[tuple[str, str, str, Layer]]:
        every = []
        for platform, workspaces in self._workspaces.items():
            for workspace, top in workspaces.items():
                every.append((platform, workspace, "", top))
                for channel, inner in getattr(top, "channels", {}).items():
                    every.append((platform, workspace, channel, inner))
        return every


def _path(platform: str, workspace: str, channel: str, key: str) -> str:
    """``slack.T0123.channels.C0456.policy``, the TOML path of a layer's key."""
    inner = f".channels.{channel}" if channel else ""
    return f"{platform}.{workspace}{inner}.{key}"
