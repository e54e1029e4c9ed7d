"""The tables of the settings layers: what a workspace, guild or channel may set.

Each layer is a pydantic model validated at start with the TOML file's own types
(``strict``: ``false``, not ``"no"``) and the bounds of the bot's settings of the
same names; a bad one stops the bot with its dotted key path (:mod:`bot.layers`
resolves them). Slack ids: https://api.slack.com/types/conversation (channel ids
start with C, G or D) and team ids start with T (E for an Enterprise Grid
organisation); Discord ids are snowflakes
(https://discord.com/developers/docs/reference#snowflakes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from conversations.access import SLACK_USER, SNOWFLAKE, parse_approver, platform_problem
from conversations.channels import BusyMode, OverLimit, ProgressMode
from core.contexts import StrategyName
from core.policy.policy import ToolPolicy
from core.retry import MAX_ATTEMPTS

MAX_INSTRUCTIONS = 20_000
"""Characters of a layer's instructions (they go into every model request)."""
ModelId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
CommandSeconds = Annotated[float, Field(gt=0, le=24 * 3600, allow_inf_nan=False)]
"""Seconds of a command's wall-clock or CPU time: at most a day."""
MemoryMb = Annotated[int, Field(gt=0, le=1024 * 1024)]
"""Megabytes a command's processes may use together: at most 1 TiB."""
Processes = Annotated[int, Field(ge=8, le=4_194_304)]
"""Processes (threads included) a command may run at once: at least 8 (the sandbox and
the shell take a few), at most the kernel's own ceiling (``pid_max``, 2^22)."""
OutputChars = Annotated[int, Field(gt=100, le=10_000_000)]
RequestSeconds = Annotated[float, Field(gt=0, le=365 * 24 * 3600, allow_inf_nan=False)]
"""Seconds a request waits for a person: at most a year."""
PerUser = Annotated[int, Field(ge=1, le=100_000)]
AtOnce = Annotated[int, Field(ge=1, le=1_000_000)]
"""Runs, model calls or commands at once (a limit of slots)."""
Priority = Annotated[int, Field(ge=-1_000, le=1_000)]
"""A run's priority in the queue for slots: higher goes first (-1000 to 1000)."""
ContextTokens = Annotated[int, Field(ge=1_000, le=100_000_000)]
"""Tokens of a model's context window."""
Share = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
"""A share (0 to 1) of something."""
KeepTurns = Annotated[int, Field(ge=1, le=50)]
"""Model turns compaction keeps whole (``context_keep_turns``)."""
BudgetTokens = Annotated[int, Field(ge=1, le=10**12)]
"""Tokens of a budget (every kind counted): at most a trillion."""
BudgetUsd = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]
"""Dollars of a budget: at most a million (kept as micro-dollars, :func:`micro_usd`)."""
ToolRetry = Literal["none", "fixed", "exponential"]
"""How a failed tool call safe to repeat is tried again (:func:`core.retry.retry_policy`)."""
RetryAttempts = Annotated[int, Field(ge=1, le=MAX_ATTEMPTS)]
"""Attempts of a tool call in all, under a retry policy (1 to 10)."""
FailureLimit = Annotated[int, Field(ge=1, le=100)]
"""Failed commands in a row before the people are asked for help (1 to 100)."""
StepTurnLimit = Annotated[int, Field(ge=1, le=10_000)]
"""Model turns in one workflow step before the people are asked whether to go on (1 to
10,000)."""
Consultations = Annotated[int, Field(ge=0, le=1_000)]
"""``ask_expert`` consultations a conversation may make (0: none, the tool not offered)."""
WorkflowName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=63)]
"""A workflow's name (``default``, ``chat``, ``validate-fix``, or one of the
``workflows_folder``'s); whether the bot has it is checked at start
(:meth:`bot.layers.Layers.check_workflows`)."""


def _shown_whole(command: str) -> str:
    """``command``, when the plan a person approves can show it as one code span: no
    backtick, no line break (ValueError otherwise)."""
    if "`" in command:
        raise ValueError(
            "no backticks: the plan shows the command in a code span, which a backtick "
            "would end (write $(...) instead)"
        )
    if "\n" in command or "\r" in command:
        raise ValueError(
            "one line: the plan shows the command in a code span (join commands with && or ;)"
        )
    return command


def _scopes(value: list[str]) -> list[str]:
    """Approval scopes: each once at most, ``once`` among them (a reaction allows once)."""
    if len(set(value)) != len(value):
        raise ValueError("names a scope twice")
    if "once" not in value:
        raise ValueError('must include "once": a reaction always allows a call once')
    return value


ApprovalScopes = Annotated[list[Literal["once", "run", "channel"]], AfterValidator(_scopes)]
"""How far a person's approval of a tool call may reach (:mod:`core.vocabulary.approvals`):
``once`` always, and ``run`` (the rest of the run) or ``channel`` (always in the
channel) where offered."""

CheckCommand = Annotated[str, StringConstraints(max_length=2_000), AfterValidator(_shown_whole)]
"""The command a workflow's ``{check_command}`` stands for (empty: none): one line without
backticks, so the plan a person approves shows it whole."""


def micro_usd(dollars: float) -> int:
    """``dollars`` (a settings value) in integer micro-dollars, rounded half-up."""
    return int((Decimal(str(dollars)) * 1_000_000).quantize(Decimal(1), ROUND_HALF_UP))


LAYERED = (
    "model",
    "fallback_models",
    "planner_model",
    "executor_model",
    "expert_model",
    "instructions",
    "approvers",
    "mutating_tools",
    "git_repo",
    "command_timeout",
    "command_cpu_seconds",
    "command_memory_mb",
    "command_processes",
    "output_limit",
    "progress_mode",
    "busy_mode",
    "request_ttl",
    "mention_requester",
    "user_runs",
    "user_runs_over",
    "user_mentions_per_hour",
    "workspace_runs",
    "priority",
    "conversation_budget_tokens",
    "conversation_budget_usd",
    "channel_daily_budget_tokens",
    "channel_daily_budget_usd",
    "context_window",
    "compact_at",
    "tool_retry",
    "tool_retry_attempts",
    "context_strategy",
    "context_keep_turns",
    "failure_limit",
    "step_turn_limit",
    "expert_consultations",
    "expert_budget_usd",
    "workflow",
    "workflows",
    "check_command",
    "approval_scopes",
)
"""The settings a workspace, guild or channel layer may set besides ``policy`` (same
names, meanings and bounds as the bot's settings of the same names)."""

POLICY_KEYS = ("ask_commands", "mutating_needs_plan", "allow_rules")
"""What a layer's ``[policy]`` table sets that has a direction: its ask list, its plan
gate and its ``decision = "allow"`` rules (``deny`` and ``ask`` rules always tighten)."""


class Direction(StrEnum):
    """Which way a layered setting tightens (:data:`DIRECTIONS`)."""

    LOWER = "lower"
    """A number: lower is tighter; absent (none: no cap, no budget) is the loosest."""
    SUBSET = "subset"
    """A list of people: a subset is tighter (fewer may decide)."""
    SUPERSET = "superset"
    """A list of asks: a superset is tighter (more commands ask)."""
    FEWER = "fewer"
    """A list of things allowed (approval scopes): a subset is tighter."""
    TRUE_IS_TIGHTER = "true_is_tighter"
    FALSE_IS_TIGHTER = "false_is_tighter"
    EACH_LOOSENS = "each_loosens"
    """Rules that let calls through: each one loosens, none is the tightest."""
    FREE = "free"
    """No safety direction: every layer sets it (why, for each: :data:`DIRECTIONS`)."""


DIRECTIONS: Mapping[str, Direction] = MappingProxyType(
    {
        "model": Direction.FREE,
        "fallback_models": Direction.FREE,
        "planner_model": Direction.FREE,
        "executor_model": Direction.FREE,
        "expert_model": Direction.FREE,
        "instructions": Direction.FREE,
        "approvers": Direction.SUBSET,
        "mutating_tools": Direction.FALSE_IS_TIGHTER,
        "git_repo": Direction.FREE,
        "command_timeout": Direction.LOWER,
        "command_cpu_seconds": Direction.LOWER,
        "command_memory_mb": Direction.LOWER,
        "command_processes": Direction.LOWER,  # the sandbox's process cap (issue 22)
        "output_limit": Direction.LOWER,
        "progress_mode": Direction.FREE,
        "busy_mode": Direction.FREE,
        "request_ttl": Direction.LOWER,
        "mention_requester": Direction.FREE,
        "user_runs": Direction.LOWER,
        "user_runs_over": Direction.FREE,
        "user_mentions_per_hour": Direction.LOWER,
        "workspace_runs": Direction.LOWER,
        "priority": Direction.FREE,
        "conversation_budget_tokens": Direction.LOWER,
        "conversation_budget_usd": Direction.LOWER,
        "channel_daily_budget_tokens": Direction.LOWER,
        "channel_daily_budget_usd": Direction.LOWER,
        "context_window": Direction.FREE,
        "compact_at": Direction.FREE,
        "tool_retry": Direction.FREE,
        "tool_retry_attempts": Direction.FREE,
        "context_strategy": Direction.FREE,
        "context_keep_turns": Direction.FREE,
        "failure_limit": Direction.LOWER,
        "step_turn_limit": Direction.LOWER,
        "expert_consultations": Direction.LOWER,
        "expert_budget_usd": Direction.LOWER,
        "workflow": Direction.FREE,
        "workflows": Direction.FREE,
        "check_command": Direction.FREE,
        "approval_scopes": Direction.FEWER,
        "ask_commands": Direction.SUPERSET,
        "mutating_needs_plan": Direction.TRUE_IS_TIGHTER,
        "allow_rules": Direction.EACH_LOOSENS,
    }
)
"""Which way each layered setting tightens (:mod:`bot.loosening` applies it alike to all).

Caps, budgets, request lifetimes and per-user limits are ``lower``; ``output_limit``
too (a cap on what one tool result puts before the model, and so on the spend),
``failure_limit`` (failed commands in a row before a person is asked: lower asks sooner),
``step_turn_limit`` (model turns in a workflow step before a person is asked whether to
go on: lower asks sooner, and bounds the spend), and the expert's budget,
``expert_consultations`` and ``expert_budget_usd`` (fewer consultations of the dearer
model).
``approval_scopes`` are ``fewer``: a layer may offer fewer of them (``["once"]``: an
approval never reaches past its call), and offers more only where a wider layer lets it.
``approvers`` is a ``subset``: a channel may narrow them, and only a wider layer adds
one (by default the bot's ``workspaces_may_loosen`` lets workspaces and guilds do so);
a group or role counts as itself, so a channel naming one member of a wider layer's
group adds an approver. The free keys, and why each is free:

- ``model``, ``fallback_models``, ``planner_model``, ``executor_model``,
  ``expert_model``: which model answers is a choice of quality and price, not of what
  may run: every tool call meets the same policy whatever the model (or role), and
  the budgets (``lower``) bound the spend;
- ``instructions``: words to the model grant nothing; the policy checks each call
  whatever the model was told;
- ``git_repo``: which project a channel works on, the first reason to give a channel
  a layer; each conversation gets its own clone, under the same policy and sandbox (the
  bot clones it, so keep the bot's own git credentials to the repositories it serves);
- ``progress_mode``: how notes show in a thread, not what runs;
- ``busy_mode``: what a message sent mid-run becomes (a note, the next request, or
  an instruction that cancels the calls not yet run); only those who may stop the run
  interrupt it, and every call still meets the same policy;
- ``mention_requester``: whether the requester is named (and notified) on the plan, the
  question and the answer, not what runs or who may decide;
- ``context_window``, ``compact_at``: how a conversation's history is kept within the
  model's window; they follow the model (free), and the budgets bound the spend;
- ``tool_retry``, ``tool_retry_attempts``: how often a failed call of a read-only tool
  is tried again; it changes nothing (mutating tools are never tried again) and runs
  under the same policy each time.
- ``context_strategy``, ``context_keep_turns``: what the model is shown of its plan and
  how much compaction keeps whole; words to the model, like ``instructions``;
- ``workflow``, ``workflows``: which workflow a request runs, and which a mention may ask
  for: every workflow is checked when it is loaded to put a person's approval before
  any state that changes things (:mod:`core.workflows.checks`), and every call meets
  the same policy in any of them;
- ``check_command``: the command ``validate-fix`` runs: it is in the plan a person
  approves before it runs, and it runs with ``run_command``, as the model's commands do;
- ``user_runs_over``: whether a person over ``user_runs`` is queued or refused; either
  way no more of theirs run at once;
- ``priority``: which of the operator's own channels goes first when runs queue; it
  lets no more run at once, and aging (``priority_aging``) lets a lower one through.

``command_processes`` (the sandbox's process cap) is listed ahead of its layered key.
"""

LOOSENABLE = frozenset(
    name
    for name, direction in DIRECTIONS.items()
    if direction is not Direction.FREE and name in (*LAYERED, *POLICY_KEYS)
)
"""The names ``workspaces_may_loosen`` and ``channels_may_loosen`` may list."""


def _loosenable(name: str) -> str:
    if name in LOOSENABLE:
        return name
    if DIRECTIONS.get(name) is Direction.FREE:
        raise ValueError(f"{name!r} is free: every layer may set it, no list is needed")
    raise ValueError(f"{name!r} is not a setting to loosen; use {', '.join(sorted(LOOSENABLE))}")


Loosenable = Annotated[str, AfterValidator(_loosenable)]
"""A setting a ``*_may_loosen`` list names (:data:`LOOSENABLE`)."""


def _approver(entry: str) -> str:
    parse_approver(entry)  # ValueError for a malformed entry
    problem = platform_problem(entry)
    if problem is not None:
        raise ValueError(problem)
    return entry


PlatformApprover = Annotated[str, AfterValidator(_approver)]
"""An approver entry by id (a name proves nothing on Slack or Discord)."""


class Layer(BaseModel):
    """What one workspace, guild or channel sets; None (absent) takes the next layer's."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)  # TOML has real types
    platform: ClassVar[str] = ""

    model: ModelId | None = None
    fallback_models: list[ModelId] | None = None
    """Models asked in turn when the model is overloaded (529, or 429 after retries)."""
    planner_model: ModelId | None = None
    """The planner's model (absent here: the next layer's; unset everywhere: ``model``)."""
    executor_model: ModelId | None = None
    """The executor's model (absent here: the next layer's; unset everywhere: ``model``)."""
    expert_model: ModelId | None = None
    """The expert's model (absent here: the next layer's; unset everywhere: no expert)."""
    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS)
    approvers: list[PlatformApprover] | None = None
    policy: dict[str, Any] | None = None
    """A ``[policy]`` table of this layer: ``rules`` (and ``ask_commands``,
    ``mutating_needs_plan``), as the bot's own (:meth:`ToolPolicy.from_toml_table`)."""
    mutating_tools: bool | None = None
    """False: no mutating tool (file writes, commands) runs here at all."""
    git_repo: str | None = None
    command_timeout: CommandSeconds | None = None
    command_cpu_seconds: CommandSeconds | None = None
    command_memory_mb: MemoryMb | None = None
    command_processes: Processes | None = None
    output_limit: OutputChars | None = None
    progress_mode: ProgressMode | None = None
    busy_mode: BusyMode | None = None
    """``steer``, ``queue`` or ``interrupt``: what a message sent while a run works becomes."""
    request_ttl: RequestSeconds | None = None
    mention_requester: bool | None = None
    """False: the plan, the question and the answer here do not mention the requester."""
    user_runs: PerUser | None = None
    user_runs_over: OverLimit | None = None
    """``queue`` (a run over ``user_runs`` waits) or ``refuse`` (a request over it starts
    nothing)."""
    user_mentions_per_hour: PerUser | None = None
    workspace_runs: AtOnce | None = None
    """Runs at once in this workspace or guild."""
    priority: Priority | None = None
    """The priority of runs here when they queue for a slot (higher first)."""
    conversation_budget_tokens: BudgetTokens | None = None
    conversation_budget_usd: BudgetUsd | None = None
    channel_daily_budget_tokens: BudgetTokens | None = None
    channel_daily_budget_usd: BudgetUsd | None = None
    context_window: ContextTokens | None = None
    compact_at: Share | None = None
    tool_retry: ToolRetry | None = None
    tool_retry_attempts: RetryAttempts | None = None
    context_strategy: StrategyName | None = None
    context_keep_turns: KeepTurns | None = None
    failure_limit: FailureLimit | None = None
    step_turn_limit: StepTurnLimit | None = None
    expert_consultations: Consultations | None = None
    expert_budget_usd: BudgetUsd | None = None
    workflow: WorkflowName | None = None
    """The workflow a request runs when it asks for none."""
    workflows: list[WorkflowName] | None = None
    """The workflows a mention may ask for with ``workflow=NAME`` (``workflow`` too)."""
    check_command: CheckCommand | None = None
    """The command ``{check_command}`` stands for in a workflow (``validate-fix``)."""
    approval_scopes: ApprovalScopes | None = None
    """How far an approval of a tool call may reach here: ``once``, ``run``, ``channel``."""

    @field_validator("policy")
    @classmethod
    def _valid_policy(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            ToolPolicy.from_toml_table(value)
        return value

    def models(self) -> set[str]:
        """Every model id this layer names: its model, fallbacks and each role's."""
        named = (self.model, self.planner_model, self.executor_model, self.expert_model)
        return {m for m in named if m is not None} | set(self.fallback_models or ())

    @field_validator("approvers")
    @classmethod
    def _approvers_of_the_platform(cls, value: list[str] | None) -> list[str] | None:
        for index, entry in enumerate(value or ()):
            approver = parse_approver(entry)
            if cls.platform == "slack" and not (
                approver.kind == "group"
                or (approver.kind == "user" and SLACK_USER.fullmatch(approver.value))
            ):
                raise ValueError(
                    f"approvers[{index}]: {entry!r} is not a Slack approver; "
                    "use U0123ABCD, user:U0123ABCD or group:S0123ABCD"
                )
            if cls.platform == "discord" and not (
                approver.kind in ("user", "role")
                and entry.strip().startswith(approver.kind)
                and SNOWFLAKE.fullmatch(approver.value)
            ):
                raise ValueError(
                    f"approvers[{index}]: {entry!r} is not a Discord approver; "
                    "use user:<number> or role:<number>"
                )
        return value


class SlackChannel(Layer):
    """A Slack channel's layer (``[slack.<team_id>.channels.<channel_id>]``)."""

    platform: ClassVar[str] = "slack"


class DiscordChannel(Layer):
    """A Discord channel's layer (``[discord.<guild_id>.channels.<channel_id>]``)."""

    platform: ClassVar[str] = "discord"


def _id(pattern: str, what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return AfterValidator(check)


SlackTeamId = Annotated[
    str, _id(r"[TE][A-Z0-9]{2,}", "a Slack team id (T0123ABCD, or E0123ABCD for an organisation)")
]
SlackChannelId = Annotated[
    str, _id(r"[CGD][A-Z0-9]{2,}", "a Slack channel id (C0123ABCD; G or D for private ones)")
]
Snowflake = Annotated[
    str, _id(r"[1-9][0-9]{0,19}", "a Discord id (a number, e.g. 1198206788567171079)")
]


class SlackWorkspace(SlackChannel):
    """A Slack workspace's layer (``[slack.<team_id>]``) and its channels' layers."""

    channels: dict[SlackChannelId, SlackChannel] = {}
    channels_may_loosen: list[Loosenable] = []
    """Settings this workspace's channels may loosen (as far as the workspace may itself:
    :mod:`bot.loosening`)."""


class DiscordGuild(DiscordChannel):
    """A Discord guild's layer (``[discord.<guild_id>]``) and its channels' layers."""

    channels: dict[Snowflake, DiscordChannel] = {}
    channels_may_loosen: list[Loosenable] = []
    """Settings this guild's channels may loosen (as far as the guild may itself:
    :mod:`bot.loosening`)."""


_PLACE_IDS: dict[str, tuple[Any, Any]] = {
    "slack": (TypeAdapter(SlackTeamId), TypeAdapter(SlackChannelId)),
    "discord": (TypeAdapter(Snowflake), TypeAdapter(Snowflake)),
}


def place_problem(platform: str, team: str, channel: str) -> str | None:
    """Why ``team`` and ``channel`` cannot be a place on ``platform`` (an empty one is
    "any"), in the words the TOML layers use; None when they can. The console's ids
    are free text."""
    adapters = _PLACE_IDS.get(platform)
    if adapters is None:
        return None
    team_ids, channel_ids = adapters
    for flag, value, adapter in (("--team", team, team_ids), ("--channel", channel, channel_ids)):
        if not value:
            continue
        try:
            adapter.validate_python(value)
        except ValidationError as exc:
            return f"{flag}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}"
    return None
