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
then the defaults; but a nearer layer may loosen a setting only where a wider layer
lets it (:mod:`bot.loosening`), else the wider value holds and the refusal is told.
Tool policy rules are the exception: every layer's rules are checked, and a ``deny``
from any layer wins, then an ``ask`` from any layer (:mod:`core.policy.policy`,
:mod:`bot.layer_policy`). :meth:`Layers.at` resolves a place and says, for each
value, which layer it came from and what was refused (``threadbot settings
explain``, the in-chat ``/threadbot settings``). The tables themselves:
:mod:`bot.layer_tables`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.layer_policy import PlacePolicy, policy_at
from bot.layer_tables import LAYERED, DiscordGuild, Layer, SlackWorkspace, micro_usd
from bot.loosening import Grants, Refusals, Step
from bot.organisations import Organisations
from conversations.channels import ChannelSettings, ProgressMode
from conversations.events import PlatformRef
from core.policy.policy import RuleLayer, ToolPolicy
from core.pricing import Budgets, Limit
from core.retry import retry_policy
from core.run.settings import EngineSettings
from core.tools.workspaces import without_credentials
from core.vocabulary.approvals import ApprovalScope


class UnknownWorkflows(ValueError):
    """``workflow`` or ``workflows`` values that name no workflow the bot has: ``lines``
    says, one each, where (``THREADBOT_WORKFLOW``, ``threadbot.toml:
    slack.T0123.channels.C0456.workflows``), which name and the workflows there are."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = tuple(lines)
        super().__init__("\n".join(self.lines))


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
    place_policy: PlacePolicy
    """The policy here, with the layer of its ``ask_commands`` and ``mutating_needs_plan``."""
    refusals: Refusals
    """The loosenings refused here (the wider values hold)."""
    grants: Mapping[str, Sourced]
    """``workspaces_may_loosen`` and ``channels_may_loosen`` here (the bot's and, for
    channels, the workspace's or guild's own), for the explanation."""
    organisation: str | None = None
    """The organisation of the place's workspace or guild (None: the console's);
    ``organised``: whether it has a layer (an ``[organisations.<name>]`` table)."""
    organised: bool = False

    @property
    def policy(self) -> ToolPolicy:
        """The bot's policy with the nearer layers' accepted rules, asks and gates and
        ``mutating_tools``."""
        return self.place_policy.policy

    def __getitem__(self, name: str) -> Any:
        return self.values[name].value

    @property
    def approval_scopes(self) -> tuple[ApprovalScope, ...]:
        """The approval scopes offered here: the setting's, or only ``once`` where commands
        run without a sandbox (then nothing is remembered, and no rule answers)."""
        if self.policy.every_command_asks:
            return (ApprovalScope.ONCE,)
        return tuple(ApprovalScope(scope) for scope in self["approval_scopes"])

    def engine_settings(self, base: EngineSettings) -> EngineSettings:
        """``base`` with this place's model and role models, instructions, policy, caps,
        failure limit, turn cap per workflow step, the expert's budget, request lifetime,
        mention of the requester, tool retry policy, workflows, check command and
        approval scopes."""
        return dataclasses.replace(
            base,
            model=self["model"] if self.values["model"].nearer else None,  # else the model's
            fallback_models=tuple(self["fallback_models"]),
            planner_model=self["planner_model"],
            executor_model=self["executor_model"],
            expert_model=self["expert_model"],
            instructions=self["instructions"],
            tool_policy=self.policy,
            command_timeout=self["command_timeout"],
            command_cpu_seconds=self["command_cpu_seconds"],
            command_memory_mb=self["command_memory_mb"],
            command_processes=self["command_processes"],
            output_limit=self["output_limit"],
            request_ttl=self["request_ttl"],
            mention_requester=self["mention_requester"],
            git_repo=self["git_repo"],
            context_window=self["context_window"],
            compact_at=self["compact_at"],
            tool_retry=retry_policy(self["tool_retry"], attempts=self["tool_retry_attempts"]),
            context_strategy=self["context_strategy"],
            context_keep_turns=self["context_keep_turns"],
            failure_limit=self["failure_limit"],
            step_turn_limit=self["step_turn_limit"],
            expert_consultations=self["expert_consultations"],
            expert_budget_micro_usd=_micro_usd(self["expert_budget_usd"]),
            workflow=self["workflow"],
            workflows=tuple(self["workflows"]),
            check_command=self["check_command"],
            approval_scopes=self.approval_scopes,
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
            user_runs_over=self["user_runs_over"],
            user_mentions_per_hour=self["user_mentions_per_hour"],
            workspace_runs=self["workspace_runs"],
            priority=self["priority"],
            progress_mode=self["progress_mode"],
            busy_mode=self["busy_mode"],
            explained=("Settings here, each with the layer it came from:", *self.explain()),
        )

    def explain(self) -> list[str]:
        """One line per setting, ``name = value  (layer)``, and after it, on the same
        line, each loosening of it that was refused and why; no secret is among them (a
        password in a ``git_repo`` URL is hidden)."""
        lines = []
        if self.organisation is not None:
            table = (
                f"organisations.{self.organisation}" if self.organised else "no table of its own"
            )
            lines.append(f"organisation = {self.organisation!r}  ({table})")
        lines += [
            self._line(name, _shown(name, sourced.value), sourced.layer)
            for name, sourced in self.values.items()
        ]
        sources = self.place_policy.sources
        for name, shown in (
            ("ask_commands", self.place_policy.ask_commands_shown()),
            ("mutating_needs_plan", repr(self.policy.mutating_needs_plan)),
        ):
            lines.append(self._line(name, shown, sources[name]))
        lines += [f"{name} = {g.value!r}  ({g.layer})" for name, g in self.grants.items()]
        lines.append("policy rules, nearest layer first (a deny from any layer wins, then an ask):")
        rules = [
            f"  {rule.label()}  ({layer.name})"
            for layer in (
                *self.policy.layers,
                RuleLayer(name="bot settings", rules=self.policy.rules),
            )
            for rule in layer.rules
        ]
        lines += rules or ["  none"]
        lines += [f"  {said}" for said in self.refusals.by_name.get("allow_rules", ())]
        return lines

    def _line(self, name: str, shown: str, layer: str) -> str:
        refused = "".join(f"; {said}" for said in self.refusals.by_name.get(name, ()))
        return f"{name} = {shown}  ({layer}){refused}"


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
    return Limit(tokens=tokens, micro_usd=_micro_usd(dollars))


def _micro_usd(dollars: float | None) -> int | None:
    """Dollars of a setting as micro-dollars (None: no cap)."""
    return None if dollars is None else micro_usd(dollars)


_AS_MODEL = frozenset({"planner_model", "executor_model"})
"""Role models that take ``model`` when unset."""


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "(none: model)" if name in _AS_MODEL else "(none)"
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

    def know(self, conversation_id: str, ref: PlatformRef) -> None:
        """Keep the settings of a conversation just opened at ``ref``'s place, so its first
        run asks the store nothing for them (:attr:`conversations.hub.HubSettings.on_open`)."""
        self._remember(conversation_id, self.at(ref))

    def _remember(self, conversation_id: str, found: Effective) -> None:
        self._known[conversation_id] = found  # shared by every conversation of the place
        if len(self._known) > self._keep:
            self._known.popitem(last=False)

    async def of(self, conversation_id: str) -> Effective:
        """The settings of a conversation; the bot's own for an unknown id."""
        found = self._known.get(conversation_id)
        if found is None:
            ref = await self._binding(conversation_id)
            found = self._layers.at("", "", "") if ref is None else self.at(ref)
            self._remember(conversation_id, found)
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
    ``grants``: what the bot's settings let nearer layers loosen (:mod:`bot.loosening`).
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
        grants: Grants | None = None,
        organisations: Organisations | None = None,
    ) -> None:
        self._bot = bot
        self._orgs = organisations or Organisations({})
        self._grants = grants or Grants()
        self._set_by = set_by
        self._workspaces: dict[str, Mapping[str, Layer]] = {"slack": slack, "discord": discord}
        self._bot_policy = bot_policy
        self._known = known_tools
        self._cache: dict[tuple[str, str, str, str], Effective] = {}

    def check_tools(self) -> None:
        """Build every layer's policy; raises ``ValueError`` with the table's dotted path
        for a rule about an unknown tool."""
        for path, layer in self._tables():
            if layer.policy is not None:
                ToolPolicy.from_toml_table(layer.policy, self._known, where=f"{path}.policy")

    def check_workflows(self, known: Collection[str], *, toml_file: str) -> None:
        """Raise :class:`UnknownWorkflows` when a ``workflow`` or ``workflows`` value of any
        layer (the bot's, a workspace's, a guild's, a channel's) names a workflow not in
        ``known``; ``toml_file`` is the settings file, as its errors name it."""
        said = ", ".join(known)
        lines = []
        for name in ("workflow", "workflows"):
            where = self._set_by.get(name)
            if where is not None and not where.startswith("THREADBOT_"):
                where = f"{toml_file}: {name}"
            lines += [
                f"{where or name}: no workflow called {each!r}; known: {said}"
                for each in _named(self._bot[name])
                if each not in known
            ]
        for table, layer in self._tables():
            for name in ("workflow", "workflows"):
                path = f"{table}.{name}"
                lines += [
                    f"{toml_file}: {path}: no workflow called {each!r}; known: {said}"
                    for each in _named(getattr(layer, name))
                    if each not in known
                ]
        if lines:
            raise UnknownWorkflows(lines)

    def at(self, platform: str, workspace: str, channel: str) -> Effective:
        """The effective settings in ``channel`` of ``workspace`` on ``platform``.

        Cached per layer chain, not per place: every channel without layers of its
        own shares one :class:`Effective`, so memory grows with the layers, not the
        channels seen.
        """
        organisation = self._orgs.of(platform, workspace) or ""
        top = self._workspaces.get(platform, {}).get(workspace)
        if top is None:
            key = (platform, organisation, "", "")
        elif channel in getattr(top, "channels", {}):
            key = (platform, organisation, workspace, channel)
        else:
            key = (platform, organisation, workspace, "")
        return self._at_key(key)

    def _at_key(self, key: tuple[str, str, str, str]) -> Effective:
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._resolve(*key)
        return found

    def _keys(self) -> list[tuple[str, str, str, str]]:
        """The place of every layer nearer than the bot's: each organisation's (on each
        platform), each workspace's and guild's, each channel's."""
        keys = [
            (platform, name, "", "")
            for name in self._orgs.tables()
            for platform in ("slack", "discord")
        ]
        for platform, workspace, channel, _ in self._all():
            keys.append((platform, self._orgs.of(platform, workspace) or "", workspace, channel))
        return keys

    def _tables(self) -> list[tuple[str, Layer]]:
        """Every layer nearer than the bot's with its TOML path (``organisations.acme``,
        ``slack.T0123.channels.C0456``)."""
        found: list[tuple[str, Layer]] = [
            (f"organisations.{name}", table) for name, table in self._orgs.tables().items()
        ]
        found += [(_path(p, w, c), layer) for p, w, c, layer in self._all()]
        return found

    def queues_anywhere(self) -> bool:
        """Whether some layer (the bot's, a workspace's, a guild's, a channel's) makes runs
        queue: a ``workspace_runs``, or a ``user_runs`` that queues (docs/architecture.md,
        "Limits and priorities")."""
        for key in [("", "", "", ""), *self._keys()]:
            here = self._at_key(key)
            if here["workspace_runs"] is not None:
                return True
            if here["user_runs"] is not None and here["user_runs_over"] == "queue":
                return True
        return False

    def refusals(self) -> list[str]:
        """Every loosening refused anywhere (each once), in the order of the layers: for
        the log at start."""
        said = (line for key in self._keys() for line in self._at_key(key).refusals.all())
        return list(dict.fromkeys(said))

    def _resolve(self, platform: str, organisation: str, workspace: str, channel: str) -> Effective:
        steps = self._steps(platform, organisation, workspace, channel)
        refusals = Refusals()
        values = {name: self._value(name, steps, refusals) for name in LAYERED}
        place_policy = policy_at(
            self._bot_policy,
            steps,
            bot_source=self._bot_label("policy"),
            grants=self._grants,
            refusals=refusals,
            mutating_tools=values["mutating_tools"].value,
            known_tools=self._known,
        )
        return Effective(
            values=values,
            place_policy=place_policy,
            refusals=refusals,
            grants=self._grants_shown(steps),
            organisation=organisation or None,
            organised=self._orgs.layer(organisation) is not None,
        )

    def _value(self, name: str, steps: list[Step], refusals: Refusals) -> Sourced:
        """The value of ``name`` in force after ``steps``, each nearer value checked
        against the wider one (:meth:`bot.loosening.Grants.refused`)."""
        bot = self._bot[name]
        found = Sourced(bot, self._bot_label(name))
        for step in steps:
            value = getattr(step.layer, name)
            if value is None:
                continue
            hint = self._grants.refused(name, value, wider=found.value, bot=bot, step=step)
            if hint is None:
                found = Sourced(value, step.label, nearer=True)
                continue
            refusals.key(
                name,
                step=step,
                shown=_shown(name, value),
                wider=_shown(name, found.value),
                source=found.layer,
                hint=hint,
            )
        return found

    def _grants_shown(self, steps: list[Step]) -> dict[str, Sourced]:
        """``workspaces_may_loosen`` and ``channels_may_loosen`` as they hold here."""
        channels = sorted(self._grants.channels)
        where = self._bot_label("channels_may_loosen")
        tops = [step for step in steps if hasattr(step.layer, "channels")]  # its workspace
        own = sorted(getattr(tops[0].layer, "channels_may_loosen", ())) if tops else []
        if own:
            where = tops[0].label + (f", and {where}" if channels else "")
            channels = list(dict.fromkeys((*own, *channels)))
        return {
            "workspaces_may_loosen": Sourced(
                sorted(self._grants.workspaces), self._bot_label("workspaces_may_loosen")
            ),
            "channels_may_loosen": Sourced(channels, where),
        }

    def _steps(self, platform: str, organisation: str, workspace: str, channel: str) -> list[Step]:
        """The layers nearer than the bot's at a place, widest first, with their labels: its
        organisation's (when it has a table), its workspace's or guild's, its channel's."""
        steps = []
        table = self._orgs.layer(organisation)
        if table is not None:
            steps.append(Step(label=f"organisation {organisation}", layer=table))
        top = self._workspaces.get(platform, {}).get(workspace)
        if top is None:
            return steps
        kind = "guild" if platform == "discord" else "workspace"
        label = f"{platform} {kind} {workspace}"
        steps.append(Step(label=label, layer=top))
        inner = getattr(top, "channels", {}).get(channel)
        if inner is not None:
            passed_on = frozenset(getattr(top, "channels_may_loosen", ()))
            steps.append(
                Step(
                    label=f"{platform} channel {channel}",
                    layer=inner,
                    channel=True,
                    granter=label,
                    passed_on=passed_on,
                )
            )
        return steps

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


def _named(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """The workflow names of a ``workflow`` or ``workflows`` value (None: none)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _path(platform: str, workspace: str, channel: str) -> str:
    """``slack.T0123.channels.C0456``, the TOML path of a workspace's or channel's table."""
    inner = f".channels.{channel}" if channel else ""
    return f"{platform}.{workspace}{inner}"
