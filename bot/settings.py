"""Settings from environment variables and an optional ``threadbot.toml``.

Precedence, highest first: environment variables (``THREADBOT_*``, plus the
conventional ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``), then the TOML file
(``threadbot.toml`` in the working directory, or the path in
``THREADBOT_CONFIG``), then the defaults below. Workspaces, guilds and channels may
set some of them again in the TOML file's ``[slack.<team>]`` and
``[discord.<guild>]`` tables (:mod:`bot.layers`). List settings take a JSON list
or a comma-separated string in the environment. Secret settings may be read from
files instead (``THREADBOT_<SETTING>_FILE``, :mod:`bot.secret_files`). Built on
pydantic-settings: https://docs.pydantic.dev/latest/concepts/pydantic_settings/
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from sqlalchemy.engine import make_url

from bot.layer_tables import (
    LAYERED,
    MAX_INSTRUCTIONS,
    ApprovalScopes,
    AtOnce,
    BudgetTokens,
    BudgetUsd,
    CheckCommand,
    CommandSeconds,
    Consultations,
    ContextTokens,
    DiscordGuild,
    FailureLimit,
    KeepTurns,
    Layer,
    Loosenable,
    MemoryMb,
    ModelId,
    OutputChars,
    PerUser,
    Priority,
    Processes,
    RequestSeconds,
    RetryAttempts,
    Share,
    SlackTeamId,
    SlackWorkspace,
    Snowflake,
    StepTurnLimit,
    ToolRetry,
    WorkflowName,
    micro_usd,
)
from bot.layers import Layers, UnknownWorkflows
from bot.loosening import Grants
from bot.operators import TOKEN_VARIABLE, Operator, OperatorName
from bot.organisations import Organisation, OrganisationName, Organisations, membership_problems
from bot.schedules import ScheduleEntry, check_schedules
from bot.secret_files import FileProblem, SecretFiles, file_variable, secret_settings
from conversations.access import parse_approver, platform_problem
from conversations.channels import OverLimit
from conversations.sealing import keys_problem
from core.contexts import StrategyName
from core.faults import Faults
from core.policy.policy import ToolPolicy
from core.pricing import Rates
from core.workflows.checks import Known
from core.workflows.loading import SHIPPED, WorkflowLibrary, load_library

DEFAULT_MODEL = "claude-opus-5-5"
"""Anthropic's recommended default (docs: platform.claude.com/docs/en/models/overview)."""

UsdPerMTok = Annotated[float, Field(ge=0, le=100_000, allow_inf_nan=False)]
"""Dollars per million tokens, as Anthropic lists them
(https://platform.claude.com/docs/en/about-claude/pricing)."""


class ModelPrice(BaseModel):
    """One model's prices: dollars per million tokens of input, output, cache reads
    (``cache_read_input_tokens``) and cache writes (``cache_creation_input_tokens``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)  # no "5", no true

    input: UsdPerMTok
    output: UsdPerMTok
    cache_read: UsdPerMTok
    cache_write: UsdPerMTok

    def rates(self) -> Rates:
        """In micro-dollars per million tokens, rounded half-up (exact to the µ$/MTok)."""
        return Rates(
            input=micro_usd(self.input),
            output=micro_usd(self.output),
            cache_read=micro_usd(self.cache_read),
            cache_write=micro_usd(self.cache_write),
        )


_STORE_DRIVERS: Mapping[str, tuple[str, str, str]] = {
    "sqlite": ("aiosqlite", "sqlite+aiosqlite:///path/to/threadbot.db", ""),
    "postgresql": ("asyncpg", "postgresql+asyncpg://user:password@host/threadbot", "postgres"),
}
"""The databases the store runs on: backend -> (its async driver, an example URL, the
extra of threadbot that installs the driver; none for SQLite's, a dependency)."""

_NAMES: Mapping[str, str] = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def database_url_checked(value: str) -> str:
    """``value`` when it names a database the store runs on through a driver installed here;
    else ``ValueError`` saying what to use or install (a settings error: exit 2).

    The store runs on SQLite through aiosqlite and on PostgreSQL through asyncpg
    (docs/architecture.md, "Durability and exactly-once"); asyncpg comes with the
    ``postgres`` extra (``pip install 'threadbot[postgres]'``). Another PostgreSQL
    driver is refused even when installed: psycopg 3 fails the store's contract
    (its delivery insert reports 0 rows).
    """
    try:
        url = make_url(value)
        backend = url.get_backend_name()
    except Exception as exc:
        raise ValueError(f"not a database URL SQLAlchemy can use: {exc}") from exc
    known = _STORE_DRIVERS.get(backend)
    if known is None:
        raise ValueError(
            f"threadbot keeps its store in SQLite or PostgreSQL, not {backend}: use "
            + " or ".join(example for _, example, _ in _STORE_DRIVERS.values())
        )
    driver, example, extra = known
    install = f" (pip install 'threadbot[{extra}]')" if extra else ""
    if "+" not in url.drivername:
        raise ValueError(f"use an async driver, e.g. {example}{install}")
    if url.get_driver_name() != driver:
        raise ValueError(
            f"threadbot reaches {_NAMES[backend]} through {driver}, not {url.get_driver_name()}: "
            f"use {example}{install}"
        )
    try:
        url.get_dialect().import_dbapi()
    except ImportError as exc:
        if extra:
            raise ValueError(
                f"its driver is not installed ({exc.name or exc}); install threadbot's "
                f"{extra} extra: pip install 'threadbot[{extra}]' ('.[{extra}]' in a checkout)"
            ) from exc
        raise ValueError(
            f"its driver is not installed ({exc.name or exc}); install it into "
            f"threadbot's environment, or use {example}"
        ) from exc
    return value


OLD_NAMES: Mapping[str, str] = {"max_turns": "step_turn_limit"}
"""Settings that are read under an old name: old name -> new name. The old one (its
``THREADBOT_*`` variable or its key at the top of the TOML file) is read as the new one,
with a warning at start (:meth:`Settings.renamed`); setting both is a settings error,
whatever their values (which one was meant cannot be told). ``max_turns`` capped the
model turns of a whole run (since a person last gave it work); ``step_turn_limit`` caps
those of one workflow step, so an old value asks no later than it did."""


def _where(name: str) -> str:
    """Where the bot's setting ``name`` was set: its variable when the environment has it,
    else the TOML file's key (``max_turns in threadbot.toml``)."""
    variable = f"THREADBOT_{name.upper()}"
    if variable in os.environ:
        return variable
    return f"{name} in {Settings.toml_file().name}"


CommaList = Annotated[list[str], NoDecode]
CommaModels = Annotated[list[ModelId], NoDecode]
CommaLoosenable = Annotated[list[Loosenable], NoDecode]
CommaInts = Annotated[list[Annotated[int, Field(ge=0)]], NoDecode]
CommaWorkflows = Annotated[list[WorkflowName], NoDecode]
CommaScopes = Annotated[ApprovalScopes, NoDecode]


_GRANTS = ("workspaces_may_loosen", "channels_may_loosen")


class Settings(BaseSettings):
    """Every setting of threadbot; the README lists them with their variables."""

    model_config = SettingsConfigDict(env_prefix="THREADBOT_", extra="forbid")

    config: Path | None = None
    """``THREADBOT_CONFIG``: the TOML file to read instead of ``./threadbot.toml``."""
    database_url: str = "sqlite+aiosqlite:///.threadbot/threadbot.db"
    workspace_root: Path = Path(".threadbot/workspaces")
    """The folder the conversations' workspaces are made in, made absolute (against the
    working folder) when the settings are read: a conversation's workspace is stored as
    an absolute path, whoever opens it (the hub, ``threadbot fork``), so the sandbox can
    bind it. With ``runner = "ray"``, a path every node of the cluster sees as the same
    folder (a shared file system mounted at the same path): a run resumed on another
    node goes on in its workspace."""
    runner: Literal["local", "ray"] = "local"
    """Where runs are carried out (docs/architecture.md, "Runners"): ``local``, in this
    process; ``ray``, on async actors of a Ray cluster (the ``ray`` extra; needs
    PostgreSQL, since the actors commit to the store from other processes and hosts)."""
    ray_address: str | None = None
    """The Ray cluster runs go to with ``runner = "ray"`` (``auto``, ``host:6379``); none:
    a local cluster, started by this process (``ray.init()``)."""
    ray_actors: int = Field(default=2, ge=1, le=1000)
    """Actors that host runs with ``runner = "ray"``, each many runs at once as coroutines;
    a run goes to the one with the fewest."""
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "anthropic_api_key")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "anthropic_base_url")
    )
    slack_bot_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_BOT_TOKEN", "slack_bot_token")
    )
    slack_app_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_APP_TOKEN", "slack_app_token")
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "slack_signing_secret"),
    )
    slack_api_url: str | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_API_URL", "slack_api_url")
    )
    slack_client_id: str | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_CLIENT_ID", "slack_client_id")
    )
    """The app's client id (Basic Information -> App Credentials): set, with
    ``slack_client_secret`` and ``token_keys``, the app is installed in workspaces through
    Slack's OAuth flow (:mod:`adapters.slack.oauth`)."""
    slack_client_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("SLACK_CLIENT_SECRET", "slack_client_secret"),
    )
    slack_redirect_uri: str | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_REDIRECT_URI", "slack_redirect_uri")
    )
    """The redirect URL registered in the app (``https://HOST/slack/oauth_redirect``); none:
    the app's only one, which Slack uses."""
    token_keys: SecretStr | None = None
    """``THREADBOT_TOKEN_KEYS``: Fernet keys, comma-separated, newest first, that seal the
    installs' tokens in the database (:mod:`conversations.sealing`): the first seals, each
    opens."""
    discord_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("DISCORD_TOKEN", "discord_token")
    )
    discord_api_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DISCORD_API_URL", "discord_api_url")
    )
    discord_gateway_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DISCORD_GATEWAY_URL", "discord_gateway_url")
    )
    discord_guilds: CommaList = []
    discord_shard_count: int | None = Field(default=None, ge=1, le=10_000)
    """Gateway shards the Discord bot runs as in all (none: one connection, no sharding);
    a guild belongs to shard ``(guild_id >> 22) % discord_shard_count``
    (https://discord.com/developers/docs/events/gateway#sharding)."""
    discord_shard_ids: CommaInts = []
    """This instance's shards, each below ``discord_shard_count`` (empty: all of them)."""
    slack_host: str = "0.0.0.0"
    slack_port: int = Field(default=3000, ge=0, le=65535)
    allow_bots: bool = False
    bot_thread_cap: int = Field(default=5, ge=0)
    file_threshold: int = Field(default=12_000, gt=0)
    shared_file_mb: float = Field(default=10.0, gt=0, le=1024)
    """Megabytes (MiB) of one file shared in a thread that the bot fetches; a larger one is
    left out, and the thread is told."""
    shared_files_per_message: int = Field(default=10, ge=0, le=100)
    """Files of one message the bot fetches; the others are left out, and the thread is told."""
    shared_file_timeout: float = Field(default=30.0, gt=0, le=600)
    """Seconds the download of one shared file may take."""
    shared_text_limit: int = Field(default=50_000, ge=0, le=1_000_000)
    """Characters of the text files shared with one message the model reads inline; the
    files past it are saved into the conversation's workspace."""
    model: ModelId = DEFAULT_MODEL
    fallback_models: CommaModels = []
    """Models asked in turn when the model is overloaded (529, or 429 after retries)."""
    planner_model: ModelId | None = None
    """The planner's model: the planning position's calls (none: ``model``)."""
    executor_model: ModelId | None = None
    """The executor's model: the executing position's calls (none: ``model``)."""
    expert_model: ModelId | None = None
    """The expert's model (none: no expert)."""
    instructions: str = Field(default="", max_length=MAX_INSTRUCTIONS)
    """The team's instructions to the model, sent after threadbot's own system prompt."""
    max_tokens: int = Field(default=4096, gt=0)
    command_timeout: CommandSeconds = 120.0
    command_cpu_seconds: CommandSeconds | None = None
    """CPU seconds each process of a command may use (none: no cap)."""
    command_memory_mb: MemoryMb | None = 2048
    """Megabytes a command's processes may use together (its cgroup; none: no cap)."""
    command_processes: Processes | None = 256
    """Processes (threads too) a command may run at once (its cgroup; none: no cap)."""
    cgroup_root: Path = Path("/sys/fs/cgroup")  # where each command gets a cgroup of its own
    output_limit: OutputChars = 16_000
    output_store_limit: int = Field(default=1_000_000, ge=1_000, le=100_000_000)
    """Characters of a tool output kept whole for ``read_output`` (a command's output past
    it keeps its head and tail)."""
    output_cache: Literal["persistent", "in_memory", "none"] = "persistent"
    """Where large tool outputs are kept whole for ``read_output`` (:mod:`core.outputs`):
    the store (kept across restarts), this process's memory (``output_cache_ttl``
    seconds each, lost to a restart), or nowhere (head and tail only, no id). For the
    whole process, not per channel."""
    output_cache_ttl: float = Field(default=3600.0, gt=0, le=365 * 24 * 3600, allow_inf_nan=False)
    """Seconds an ``in_memory`` output is kept after it was stored."""
    mutating_tools: bool = True
    """False: no mutating tool (file writes, commands) runs at all."""
    git_repo: str | None = None
    """The git repository a conversation's workspace is cloned from (none: an empty one)."""
    user_runs: PerUser | None = None
    """Runs one person may have at once (none: no limit); one more waits for a slot, or,
    with ``user_runs_over = "refuse"``, conversations going (running or waiting) past
    which a request is refused."""
    user_runs_over: OverLimit = "queue"
    """What a request over ``user_runs`` gets: ``queue`` (it waits for a slot, and says
    so in its thread) or ``refuse`` (it starts nothing, and the bot says why)."""
    user_mentions_per_hour: PerUser | None = None
    """Conversations one person may start per hour (none: no limit)."""
    workspace_runs: AtOnce | None = None
    """Runs at once in one Slack workspace or Discord guild (none: no limit)."""
    max_runs: AtOnce | None = None
    """Runs at once in this process (none: no limit); one more waits for a slot."""
    cluster_max_runs: AtOnce | None = None
    """Runs at once in all the processes sharing the database (none: no limit)."""
    model_calls_at_once: AtOnce | None = None
    """Model calls at once in all the processes sharing the database (none: no limit)."""
    commands_at_once: AtOnce | None = None
    """Commands (``run_command``) at once in all the processes sharing the database."""
    priority: Priority = 0
    """The priority of runs here when they queue for a slot (higher first)."""
    priority_aging: float = Field(default=60.0, gt=0, le=365 * 24 * 3600, allow_inf_nan=False)
    """Seconds a queued run waits for its priority to rise by one (nothing starves)."""
    queued_after: float = Field(default=2.0, ge=0, le=24 * 3600, allow_inf_nan=False)
    """Seconds a run waits for its slot before its thread is told it is queued (a shorter
    wait says nothing; 0: at once)."""
    queued_edit_every: float = Field(default=15.0, ge=0, le=24 * 3600, allow_inf_nan=False)
    """Seconds between two edits of a queued run's message as its count moves (Slack's
    ``chat.update`` is Tier 3, about 50 calls a minute per workspace:
    https://api.slack.com/methods/chat.update)."""
    conversation_budget_tokens: BudgetTokens | None = None
    """Tokens (every kind) a conversation may spend before it asks to go on (none: no budget)."""
    conversation_budget_usd: BudgetUsd | None = None
    """Dollars a conversation may spend before it asks to go on (needs prices)."""
    channel_daily_budget_tokens: BudgetTokens | None = None
    """Tokens a channel's conversations may spend per UTC day together."""
    channel_daily_budget_usd: BudgetUsd | None = None
    """Dollars a channel's conversations may spend per UTC day together (needs prices)."""
    context_window: ContextTokens = 200_000
    """Tokens the model's context holds (Claude's window: 200,000)."""
    compact_at: Share = 0.8
    """Share of ``context_window`` past which a conversation's oldest turns are summarized."""
    tool_retry: ToolRetry = "none"
    """How a failed call of a read-only tool is tried again: ``none``, ``fixed`` (a second
    apart) or ``exponential`` (a second, doubled each time, at most 30, with jitter)."""
    tool_retry_attempts: RetryAttempts = 3
    """Attempts of such a call in all, under ``fixed`` or ``exponential``."""
    context_strategy: StrategyName = "flat"
    """What the model is shown besides the conversation (docs/architecture.md, "Context
    strategies and notes"): ``flat`` nothing, ``task_list`` the plan's steps done and
    pending, ``task_tree`` the path from the request to the step in hand, ``none``
    nothing and no turn kept whole at compaction."""
    context_keep_turns: KeepTurns = 2
    """Model turns compaction keeps whole (``flat``, ``task_list``, ``task_tree``)."""
    failure_limit: FailureLimit = 2
    """Failed commands in a row (a non-zero exit, a timeout, a cap hit, a tool that does
    not exist) after which the run asks the people in the thread for help."""
    step_turn_limit: StepTurnLimit = 24
    """Model turns in one workflow step (since the step was entered, or a person last gave
    the run work) after which the run asks whether to go on."""
    max_turns: StepTurnLimit | None = None
    """The old name of ``step_turn_limit`` (:data:`OLD_NAMES`): read as it, with a warning."""
    expert_consultations: Consultations = 3
    """``ask_expert`` consultations of the expert model a conversation may make (0: the
    tool is not offered); past it a call is refused and counts as a failure."""
    workflow: WorkflowName = "default"
    """The workflow a request runs when it asks for none (:mod:`core.run.workflow`)."""
    workflows: CommaWorkflows = list(SHIPPED)
    """The workflows a mention may ask for with ``workflow=NAME`` (``workflow`` too)."""
    check_command: CheckCommand = ""
    """The command a workflow's ``{check_command}`` stands for (``validate-fix`` runs it)."""
    approval_scopes: CommaScopes = ["once", "run", "channel"]
    """How far a person's approval of a tool call may reach (:mod:`core.vocabulary.approvals`):
    once, for the run, always in the channel; a layer may offer fewer. Without a working
    sandbox only once is offered. Layered."""
    workflows_folder: Path | None = None
    """A folder of workflow files (``*.toml``) the bot loads beside the shipped ones, for
    the whole process (none: the shipped ones only)."""
    expert_budget_usd: BudgetUsd | None = 1.0
    """Dollars a conversation's consultations of the expert may cost before the next one
    is refused (the expert model's priced calls count; none: no cap in dollars)."""
    prices: dict[ModelId, ModelPrice] = {}
    """The price sheet: ``[prices."<model id>"]`` tables of dollars per million tokens."""
    approvers: CommaList = []
    approve_reactions: CommaList = [
        "white_check_mark",
        "heavy_check_mark",
        "ballot_box_with_check",
        "+1",
        "repeat",
    ]
    reject_reactions: CommaList = ["x", "heavy_multiplication_x", "-1"]
    stop_reactions: CommaList = ["octagonal_sign", "black_square_for_stop"]
    stop_command: str = "stop"
    progress_mode: Literal["replies", "status"] = "replies"
    busy_mode: Literal["steer", "queue", "interrupt"] = "steer"
    """What a message sent while a run works becomes: a note the run reads at its next
    turn boundary (``steer``), the next run's request (``queue``), or the run's next
    instruction, its turn stopped at the next tool boundary (``interrupt``, by the
    requester or an approver; anyone else's is steered). Layered."""
    progress_interval: float = Field(default=3.0, ge=0)
    running_note_every: float = Field(default=30.0, ge=0, le=24 * 3600, allow_inf_nan=False)
    """Seconds between two notes that a tool call (a long command) is still running; 0:
    none."""
    console_user: str = "you"
    console_state: Path = Path(".threadbot/console.jsonl")
    console_wait: Literal["auto", "yes", "no"] = "auto"
    model_script: Path | None = None
    log_level: str = "WARNING"
    log_format: Literal["text", "json"] = "text"
    """``text``: one line per record for a person; ``json``: one JSON object per line for a
    log pipeline, with the conversation id where there is one (:mod:`bot.logs`)."""
    ops_host: str = "127.0.0.1"
    """Where the operations address (``/healthz``, ``/readyz``, ``/metrics``) listens."""
    ops_port: int = Field(default=9464, ge=0, le=65535)
    """Its port (0: any free one, logged at start); apart from ``slack_port``."""
    inspector: bool = False
    """Whether the run inspector (:mod:`bot.inspector`: conversations, timelines, usage,
    fork and stop, in a browser) is served on the operations address under
    ``/inspector/``. Needs an operator (``[operators.NAME]``): each signs in with their
    token."""
    inspector_hosts: CommaList = ["127.0.0.1", "localhost"]
    """The names a browser may reach the inspector by: its ``Host`` header, without the
    port, must be one of them (or ``ops_host``), else 421, so a DNS name an attacker
    points at this address reads nothing (DNS rebinding). Add the name your reverse proxy
    serves it under."""
    inspector_session_hours: float = Field(default=12.0, gt=0, le=24 * 90)
    """Hours an inspector sign-in lasts before the operator signs in again."""
    request_ttl: RequestSeconds = 24 * 3600.0
    mention_requester: bool = True
    """Whether the plan and the question that wait for the requester, and the final
    answer, mention them (a layered setting: a channel may turn it off)."""
    workspace_retention_days: float = Field(default=3.0, gt=0, le=36_500)
    """Days a conversation's workspace is kept after it ended (done, failed, stopped)."""
    retention_days: float = Field(default=7.0, gt=0, le=36_500)
    """Days sent outbox rows and handled deliveries are kept before the sweeper prunes
    them (the journal, tool records and requests stay). Keep it well above the
    platforms' retry window (Slack retries an event for a few minutes): a delivery
    key pruned earlier no longer stops a duplicate."""
    fault: str = ""
    instance: str = ""
    """Lease owner name; empty means ``host:pid`` (see ``HubSettings.instance``)."""
    lease_ttl: float = Field(default=60.0, ge=1, le=86_400)
    """Seconds another instance waits before it takes over a conversation whose lease
    was not renewed (renewed every third of it)."""
    wakeup_poll: float = Field(default=1.0, ge=0.05, le=86_400)
    """Seconds between two looks at the store for stops and replies meant for the runs
    this instance holds; on PostgreSQL another instance also tells it at once
    (``LISTEN``/``NOTIFY``), on SQLite this poll is the only way."""
    shutdown_grace: float = Field(default=20.0, ge=0)
    """Seconds a SIGTERM lets running steps reach their next commit, and then again
    at most for delivering what is pending."""
    delivery_concurrency: int = Field(default=8, gt=0)
    """Conversations whose messages are delivered at once (each in its own order)."""
    restart_limit: int = Field(default=5, ge=0)
    """Restarts of a failing background task within ``restart_window`` before the
    bot gives up and exits non-zero."""
    restart_window: float = Field(default=300.0, gt=0)
    command_env: dict[str, str] = {}
    """Variables a sandboxed command sees besides ``PATH``, ``LANG`` and ``HOME`` (not secrets:
    they are on bwrap's command line)."""
    bwrap: str = "bwrap"
    """The bubblewrap binary commands are sandboxed with (a path, or a name on ``PATH``)."""
    policy: dict[str, Any] = {}
    workspaces_may_loosen: CommaLoosenable = ["approvers"]
    """Settings a workspace or guild layer may loosen (set looser than the bot's); every
    other loosening there is refused (:mod:`bot.loosening`)."""
    channels_may_loosen: CommaLoosenable = []
    """Settings every channel layer may loosen (a workspace or guild may list more for its
    own channels)."""
    organisations: dict[OrganisationName, Organisation] = {}
    """``[organisations.<name>]`` tables: an organisation's layer and its workspaces and
    guilds (:mod:`bot.organisations`); the others are in ``default``."""
    slack: dict[SlackTeamId, SlackWorkspace] = {}
    """``[slack.<team_id>]`` tables: a Slack workspace's layer and its channels'."""
    discord: dict[Snowflake, DiscordGuild] = {}
    """``[discord.<guild_id>]`` tables: a Discord guild's layer and its channels'."""
    schedules: list[ScheduleEntry] = []
    """``[[schedules]]`` tables: scheduled runs (:mod:`bot.schedules`), each with its
    platform (the one the bot runs when it names none)."""
    operators: dict[OperatorName, Operator] = {}
    """``[operators.NAME]`` tables: who may change the bot's state from the CLI
    (``threadbot policy revoke``), each with the SHA-256 of their token (:mod:`bot.operators`)."""

    @field_validator("*", mode="before")
    @classmethod
    def _secret_file_read(cls, value: object) -> object:
        """A secret setting's file that gave no value (:mod:`bot.secret_files`) is an error."""
        if isinstance(value, FileProblem):
            raise ValueError(value.reason)
        return value

    @field_validator(
        "approvers",
        "approve_reactions",
        "reject_reactions",
        "stop_reactions",
        "discord_guilds",
        "discord_shard_ids",
        "fallback_models",
        "workflows",
        "workspaces_may_loosen",
        "channels_may_loosen",
        "approval_scopes",
        "inspector_hosts",
        mode="before",
    )
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("approvers")
    @classmethod
    def _approvers_by_id(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """Each entry parses; with a Slack or Discord token, names are refused (issue 9).

        Display names prove nothing on Slack or Discord; names are ids only in the
        console (see :mod:`conversations.access` for the forms).
        """
        platform = any(
            info.data.get(k) is not None
            for k in ("slack_bot_token", "slack_client_id", "discord_token")
        )
        for entry in value:
            parse_approver(entry)  # ValueError for a malformed entry, with any adapter
            problem = platform_problem(entry) if platform else None
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("schedules")
    @classmethod
    def _schedules_placed(
        cls, value: list[ScheduleEntry], info: ValidationInfo
    ) -> list[ScheduleEntry]:
        """Names unique; each schedule on a platform the bot runs (:mod:`bot.schedules`)."""
        slack = ("slack_bot_token", "slack_client_id")
        running = [
            platform
            for platform, tokens in (("slack", slack), ("discord", ("discord_token",)))
            if any(info.data.get(token) is not None for token in tokens)
        ]
        return check_schedules(value, running or ["console"])

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in logging.getLevelNamesMapping():
            raise ValueError("use DEBUG, INFO, WARNING, ERROR or CRITICAL")
        return value.upper()

    @field_validator("console_user", "stop_command")
    @classmethod
    def _one_word(cls, value: str) -> str:
        if not re.fullmatch(r"[^\s:/]+", value):
            raise ValueError("must be one word, without spaces, colons or slashes")
        return value

    @field_validator("stop_command")
    @classmethod
    def _not_a_console_command(cls, value: str) -> str:
        if value in ("help", "quit", "as", "decide", "settings", "threadbot"):
            raise ValueError(f"/{value} is already a command of its own")
        return value

    @field_validator("approve_reactions", "reject_reactions", "stop_reactions")
    @classmethod
    def _some_reactions(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("give at least one reaction")
        return value

    @model_validator(mode="after")
    def _shards_within_count(self) -> Settings:
        """Shard ids need a count and lie below it; the operations port is not Slack's."""
        if self.discord_shard_ids:
            if self.discord_shard_count is None:
                raise ValueError("discord_shard_ids needs discord_shard_count")
            beyond = [i for i in self.discord_shard_ids if i >= self.discord_shard_count]
            if beyond:
                raise ValueError(
                    f"discord_shard_ids {beyond} are not below discord_shard_count "
                    f"({self.discord_shard_count}): shards are numbered from 0"
                )
            if len(set(self.discord_shard_ids)) != len(self.discord_shard_ids):
                raise ValueError("discord_shard_ids names a shard twice")
        if self.ops_port and self.ops_port == self.slack_port:
            raise ValueError(
                f"ops_port and slack_port are both {self.ops_port}: the operations address "
                "stays apart from the Slack events port"
            )
        if self.inspector and not self.operators:
            raise ValueError(
                "inspector is on but no operator may sign in: add [operators.NAME] with "
                "token_sha256 = ... (threadbot operator hash prints it)"
            )
        return self

    @field_validator("organisations")
    @classmethod
    def _one_organisation_each(cls, value: dict[str, Organisation]) -> dict[str, Organisation]:
        """A workspace or guild is listed by one organisation at most."""
        problems = membership_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _installs_have_keys(self) -> Settings:
        """OAuth installs need the client id, its secret and keys to seal the tokens."""
        if (self.slack_client_id is None) != (self.slack_client_secret is None):
            raise ValueError("SLACK_CLIENT_ID and SLACK_CLIENT_SECRET go together: set both")
        problem = keys_problem(self.sealing_keys())
        if self.slack_client_id is not None and not self.sealing_keys():
            raise ValueError(
                "SLACK_CLIENT_ID needs THREADBOT_TOKEN_KEYS, the key that seals the installs' "
                "tokens in the database (make one with: threadbot tokens new-key)"
            )
        if self.token_keys is not None and problem is not None:
            raise ValueError(f"THREADBOT_TOKEN_KEYS: {problem}")
        return self

    @model_validator(mode="after")
    def _old_names_read_as_new(self) -> Settings:
        """An old name's value becomes its new name's (:data:`OLD_NAMES`); both set is an
        error. The new name stays out of the fields set, so the settings validate again
        alike (a copy with changes)."""
        for old, new in OLD_NAMES.items():
            value = getattr(self, old)
            if value is None:
                continue
            if new in self.model_fields_set:
                raise ValueError(
                    f"{_where(old)} is the old name of {new}, which is set too "
                    f"({_where(new)}): keep {new} only"
                )
            setattr(self, new, value)
            self.__pydantic_fields_set__.discard(new)
        return self

    def renamed(self) -> list[str]:
        """A warning for each setting read under its old name (:data:`OLD_NAMES`), to log
        once at start: ``THREADBOT_MAX_TURNS is the old name of step_turn_limit
        (THREADBOT_STEP_TURN_LIMIT): read as step_turn_limit = 30; rename it``."""
        return [
            f"{_where(old)} is the old name of {new} (THREADBOT_{new.upper()}): read as "
            f"{new} = {getattr(self, new)!r}; rename it"
            for old, new in OLD_NAMES.items()
            if getattr(self, old) is not None
        ]

    @model_validator(mode="after")
    def _reactions_mean_one_thing(self) -> Settings:
        sets = {
            "approve_reactions": set(self.approve_reactions),
            "reject_reactions": set(self.reject_reactions),
            "stop_reactions": set(self.stop_reactions),
        }
        names = list(sets)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                if both := sets[first] & sets[second]:
                    raise ValueError(f"{sorted(both)} in both {first} and {second}")
        return self

    @field_validator("workspace_root")
    @classmethod
    def _absolute_workspaces(cls, value: Path) -> Path:
        """The one place the workspace root is made absolute (see ``workspace_root``)."""
        return value.resolve()

    @field_validator("database_url")
    @classmethod
    def _async_database(cls, value: str) -> str:
        if value == "memory://":  # the in-memory store: nothing kept (tests, a quick try)
            return value
        return database_url_checked(value)

    @model_validator(mode="after")
    def _ray_runs_on_postgresql(self) -> Settings:
        """``runner = "ray"`` needs PostgreSQL and Ray installed."""
        if self.runner != "ray":
            return self
        backend = "memory" if self.database_url == "memory://" else None
        if backend is None:
            backend = make_url(self.database_url).get_backend_name()
        if backend != "postgresql":
            said = "memory://" if backend == "memory" else _NAMES.get(backend, backend)
            raise ValueError(
                f"runner = 'ray' ({_where('runner')}) needs PostgreSQL, not {said}: the Ray "
                "actors commit runs to the store from other processes and hosts; set "
                f"database_url to {_STORE_DRIVERS['postgresql'][1]}"
            )
        if importlib.util.find_spec("ray") is None:
            raise ValueError(
                f"runner = 'ray' ({_where('runner')}) needs Ray, which is not installed: "
                "pip install 'threadbot[ray]' ('.[ray]' in a checkout)"
            )
        return self

    @field_validator("fault")
    @classmethod
    def _known_fault(cls, value: str) -> str:
        Faults(value)
        return value

    @field_validator("command_env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name in ("PATH", "HOME", "USER", "LOGNAME"):
                raise ValueError(f"{name} is the sandbox's own")
        return value

    @model_validator(mode="after")
    def _no_secret_in_command_env(self) -> Settings:
        secrets = [s for s in self.secrets().values() if s]
        leaked = sorted(
            name
            for name, value in self.command_env.items()
            if any(secret in value for secret in secrets)
        )
        if leaked:
            raise ValueError(f"command_env {leaked} would hand a token or key to every command")
        return self

    @field_validator("policy")
    @classmethod
    def _valid_policy(cls, value: dict[str, Any]) -> dict[str, Any]:
        ToolPolicy.from_toml_table(value)
        return value

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, value: str | None) -> str | None:
        return value if value is None or value.endswith("/") else value + "/"

    @model_validator(mode="after")
    def _money_budgets_have_prices(self) -> Settings:
        """A budget in dollars counts only priced calls: every model it may apply to
        (each layer's model, fallbacks and role models) must be in the price sheet."""
        layers: list[Layer] = [*self.organisations.values()]
        layers += [*self.slack.values(), *self.discord.values()]
        layers += [c for w in self.slack.values() for c in w.channels.values()]
        layers += [c for g in self.discord.values() for c in g.channels.values()]
        places: list[Settings | Layer] = [self, *layers]
        if not any(p.conversation_budget_usd or p.channel_daily_budget_usd for p in places):
            return self
        roles = (self.planner_model, self.executor_model, self.expert_model)
        models = {self.model, *self.fallback_models} | {m for m in roles if m is not None}
        for layer in layers:
            models |= layer.models()
        unpriced = sorted(str(m) for m in models - set(self.prices))
        if unpriced:
            raise ValueError(
                f"a budget in dollars needs a price for every model; none for {unpriced} "
                '(add [prices."<model>"] with input, output, cache_read and cache_write)'
            )
        return self

    def tool_policy(self, known_tools: Collection[str] | None = None) -> ToolPolicy:
        """The tool policy of the ``[policy]`` table (the shipped default when empty).

        Raises ``ValueError`` for a rule about a tool not in ``known_tools``.
        """
        return ToolPolicy.from_toml_table(self.policy, known_tools=known_tools)

    def layers(
        self,
        known_tools: Collection[str] | None = None,
        *,
        every_command_asks: bool = False,
        known_workflows: Collection[str] | None = None,
    ) -> Layers:
        """The settings layers (:mod:`bot.layers`), the bot's from these settings;
        ``every_command_asks`` where commands cannot be sandboxed.

        Raises ``ValueError`` naming the table for a rule about a tool not in
        ``known_tools``, and :class:`bot.layers.UnknownWorkflows` for a ``workflow`` or
        ``workflows`` value, in any layer, or a schedule's ``workflow``, naming none of
        ``known_workflows`` (None: not checked).
        """
        set_by = {}
        for name in self.model_fields_set & {*LAYERED, *_GRANTS, "policy"}:
            variable = f"THREADBOT_{name.upper()}"
            set_by[name] = variable if variable in os.environ else self.toml_file().name
        for old, new in OLD_NAMES.items():
            if getattr(self, old) is not None:
                variable = f"THREADBOT_{old.upper()}"
                set_by[new] = variable if variable in os.environ else self.toml_file().name
        layers = Layers(
            bot={name: getattr(self, name) for name in LAYERED},
            set_by=set_by,
            slack=self.slack,
            discord=self.discord,
            organisations=Organisations(self.organisations),
            bot_policy=self.tool_policy(known_tools).model_copy(
                update={"every_command_asks": every_command_asks}
            ),
            known_tools=known_tools,
            grants=Grants(
                workspaces=frozenset(self.workspaces_may_loosen),
                channels=frozenset(self.channels_may_loosen),
            ),
        )
        layers.check_tools()
        if known_workflows is not None:
            layers.check_workflows(known_workflows, toml_file=str(self.toml_file()))
            said = ", ".join(known_workflows)
            unknown = [
                f"{self.toml_file()}: schedules.{each.name}.workflow: no workflow called "
                f"{each.workflow!r}; known: {said}"
                for each in self.schedules
                if each.workflow is not None and each.workflow not in known_workflows
            ]
            if unknown:
                raise UnknownWorkflows(unknown)
        return layers

    def workflow_library(self, known_tools: Collection[str] | None = None) -> WorkflowLibrary:
        """The workflows the bot may run: the shipped ones and the ``workflows_folder``'s,
        each checked, its tools against ``known_tools`` (None: not checked). Raises
        :class:`core.workflows.WorkflowErrors` with every problem, each with its file and
        line."""
        tools = None if known_tools is None else frozenset(known_tools)
        return load_library(self.workflows_folder, Known(tools=tools))

    def secrets(self) -> dict[str, str]:
        """The value of every secret setting that is set, by its variable's name:
        ``{"SLACK_BOT_TOKEN": "xoxb-...", "ANTHROPIC_API_KEY": "sk-ant-..."}``, wherever
        it was read from (the environment, a file, the TOML file). For the redactor
        (:class:`core.secrets.Redactor`); never log or show it."""
        found: dict[str, str] = {}
        for name in secret_settings(type(self).model_fields):
            value = getattr(self, name)
            if isinstance(value, SecretStr) and value.get_secret_value():
                found[name.upper()] = value.get_secret_value()
        found.pop("TOKEN_KEYS", None)  # each key on its own: THREADBOT_TOKEN_KEYS 1, 2...
        for index, key in enumerate(self.sealing_keys(), start=1):
            found[f"THREADBOT_TOKEN_KEYS {index}"] = key
        return found

    def sealing_keys(self) -> list[str]:
        """The keys of ``THREADBOT_TOKEN_KEYS``, newest first (none when unset)."""
        if self.token_keys is None:
            return []
        return [k.strip() for k in self.token_keys.get_secret_value().split(",") if k.strip()]

    @property
    def slack_installs(self) -> bool:
        """Whether the Slack app is installed in workspaces through OAuth."""
        return self.slack_client_id is not None

    @classmethod
    def unknown_variables(cls, environ: Mapping[str, str]) -> list[str]:
        """``THREADBOT_*`` variables that name no setting (most likely typos); a secret
        setting's ``THREADBOT_<SETTING>_FILE`` is known."""
        known = {  # a setting read under its own name (SLACK_BOT_TOKEN) is not THREADBOT_*
            f"THREADBOT_{name.upper()}"
            for name, field in cls.model_fields.items()
            if not isinstance(field.validation_alias, AliasChoices)
        }
        known |= {file_variable(name) for name in secret_settings(cls.model_fields)}
        known.add(TOKEN_VARIABLE)  # an operator's token, for the command that acts as one
        return sorted(k for k in environ if k.startswith("THREADBOT_") and k not in known)

    @classmethod
    def toml_file(cls) -> Path:
        """The TOML file settings are read from: ``THREADBOT_CONFIG``, else ``threadbot.toml``.

        Raises ``ValueError`` when ``THREADBOT_CONFIG`` names no file.
        """
        named = os.environ.get("THREADBOT_CONFIG")
        toml_file = Path(named or "threadbot.toml")
        if named and not toml_file.is_file():
            raise ValueError(f"THREADBOT_CONFIG names {named}, which is not a file")
        return toml_file

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Init arguments, then the secret files, the environment, the TOML file."""
        toml_file = cls.toml_file()
        return (
            init_settings,
            SecretFiles(settings_cls),
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml_file),
        )
