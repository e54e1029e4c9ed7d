"""A channel cannot loosen what wider layers keep (issue 22, "Policy across layers").

Every layered setting has a tighter direction (``bot.layer_tables.DIRECTIONS``). A
channel's attempt to loosen each one is refused (the wider value holds, checked on
the value or verdict the bot acts on), the same attempt counts where a wider layer
lists the setting (``channels_may_loosen``, ``workspaces_may_loosen``), the bot's own
settings loosen freely, and ``threadbot settings explain``, ``/threadbot settings``
and the log at start say what was refused and why. The Discord in-chat view:
``tests/test_settings_layers_discord.py``.
"""

from __future__ import annotations

import ast
import html
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot import layer_tables
from bot.layer_tables import DIRECTIONS, LAYERED, LOOSENABLE, POLICY_KEYS, Direction
from bot.layers import Effective
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.policy.policy import DEFAULT_ASK_COMMANDS, Permission
from core.run.settings import EngineSettings
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.tool_records import ToolState
from tests.fakes.slack_api import TEAM_ID
from tests.slack_harness import ALICE, BOB, CHANNEL, slack_workspace
from tests.test_settings_layers import (
    bot_posts,
    layered,
    mention_in,
    posted,
    react_in,
    threadbot,
)
from tests.test_slack_story import plan

CAROL = "U0CAROL001"
PRICED = {"claude-opus-5-5": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25}}


def check(effective: Effective, tool: str, *, plan_approved: bool = True, **arguments: Any) -> str:
    """``decision rule`` of the policy here for one call (read-only: ``read_file``)."""
    verdict = effective.policy.check(
        tool_name=tool,
        read_only=tool == "read_file",
        arguments=arguments,
        plan_approved=plan_approved,
    )
    return f"{verdict.decision} {verdict.rule}"


def engine(effective: Effective) -> EngineSettings:
    return effective.engine_settings(EngineSettings())


def unsafe_calls(effective: Effective) -> tuple[str, ...]:
    """What the policy says to ``rm -rf /`` and ``curl`` after the plan, and to a write
    before it."""
    return (
        check(effective, "run_command", command="rm -rf /"),
        check(effective, "run_command", command="curl https://example.com"),
        check(effective, "write_file", plan_approved=False, path="a.md", content="x"),
    )


@dataclass(frozen=True)
class Attempt:
    """A channel's attempt to loosen ``key``: the wider layers (``bot`` settings and the
    ``workspace`` layer), the ``channel``'s looser layer, and ``probe``, what the bot acts
    on, which reads ``tight`` while the attempt is refused and ``loose`` once allowed."""

    key: str
    channel: dict[str, Any]
    probe: Callable[[Effective], Any]
    tight: Any
    loose: Any
    workspace: dict[str, Any] = field(default_factory=dict)
    bot: dict[str, Any] = field(default_factory=dict)

    def settings(self, base: Settings, *, bot: dict[str, Any] | None = None, **top: Any) -> Any:
        """The layers at the channel: ``bot`` and ``top`` added to the bot's settings and
        the workspace's layer."""
        s = layered(
            base,
            **self.bot,
            **(bot or {}),
            slack={TEAM_ID: {**self.workspace, **top, "channels": {CHANNEL: self.channel}}},
        )
        return s.layers().at("slack", TEAM_ID, CHANNEL)


STAR_ALLOW = {"rules": [{"tool": "*", "decision": "allow"}]}

ATTEMPTS = [
    Attempt(
        "approvers",
        workspace={"approvers": [BOB]},
        channel={"approvers": [BOB, CAROL]},
        probe=lambda e: e.channel_settings.approvers,
        tight=(BOB,),
        loose=(BOB, CAROL),
    ),
    Attempt(
        "mutating_tools",
        workspace={"mutating_tools": False},
        channel={"mutating_tools": True},
        probe=lambda e: check(e, "write_file", path="a.md", content="x"),
        tight="deny mutating_tools_off",
        loose="allow plan_approved",
    ),
    Attempt(
        "command_timeout",
        channel={"command_timeout": 600.0},
        probe=lambda e: engine(e).command_timeout,
        tight=120.0,
        loose=600.0,
    ),
    Attempt(
        "command_cpu_seconds",
        workspace={"command_cpu_seconds": 10.0},
        channel={"command_cpu_seconds": 20.0},
        probe=lambda e: engine(e).command_cpu_seconds,
        tight=10.0,
        loose=20.0,
    ),
    Attempt(
        "command_memory_mb",
        bot={"command_memory_mb": 256},
        channel={"command_memory_mb": 4096},
        probe=lambda e: engine(e).command_memory_mb,
        tight=256,
        loose=4096,
    ),
    Attempt(
        "command_processes",
        channel={"command_processes": 1024},
        probe=lambda e: engine(e).command_processes,
        tight=256,
        loose=1024,
    ),
    Attempt(
        "output_limit",
        channel={"output_limit": 50_000},
        probe=lambda e: engine(e).output_limit,
        tight=16_000,
        loose=50_000,
    ),
    Attempt(
        "request_ttl",
        workspace={"request_ttl": 3600.0},
        channel={"request_ttl": 7 * 86400.0},
        probe=lambda e: engine(e).request_ttl,
        tight=3600.0,
        loose=7 * 86400.0,
    ),
    Attempt(
        "user_runs",
        workspace={"user_runs": 2},
        channel={"user_runs": 5},
        probe=lambda e: e.channel_settings.user_runs,
        tight=2,
        loose=5,
    ),
    Attempt(
        "workspace_runs",
        workspace={"workspace_runs": 4},
        channel={"workspace_runs": 40},
        probe=lambda e: e.channel_settings.workspace_runs,
        tight=4,
        loose=40,
    ),
    Attempt(
        "user_mentions_per_hour",
        bot={"user_mentions_per_hour": 3},
        channel={"user_mentions_per_hour": 30},
        probe=lambda e: e.channel_settings.user_mentions_per_hour,
        tight=3,
        loose=30,
    ),
    Attempt(
        "conversation_budget_tokens",
        workspace={"conversation_budget_tokens": 1000},
        channel={"conversation_budget_tokens": 5000},
        probe=lambda e: engine(e).budgets.conversation.tokens,
        tight=1000,
        loose=5000,
    ),
    Attempt(
        "conversation_budget_usd",
        bot={"prices": PRICED, "conversation_budget_usd": 1.0},
        channel={"conversation_budget_usd": 5.0},
        probe=lambda e: engine(e).budgets.conversation.micro_usd,
        tight=1_000_000,
        loose=5_000_000,
    ),
    Attempt(
        "channel_daily_budget_tokens",
        workspace={"channel_daily_budget_tokens": 10_000},
        channel={"channel_daily_budget_tokens": 50_000},
        probe=lambda e: engine(e).budgets.channel_day.tokens,
        tight=10_000,
        loose=50_000,
    ),
    Attempt(
        "channel_daily_budget_usd",
        bot={"prices": PRICED},
        workspace={"channel_daily_budget_usd": 2.0},
        channel={"channel_daily_budget_usd": 20.0},
        probe=lambda e: engine(e).budgets.channel_day.micro_usd,
        tight=2_000_000,
        loose=20_000_000,
    ),
    Attempt(
        "failure_limit",
        channel={"failure_limit": 5},
        probe=lambda e: engine(e).failure_limit,
        tight=2,
        loose=5,
    ),
    Attempt(
        "step_turn_limit",
        channel={"step_turn_limit": 100},
        probe=lambda e: engine(e).step_turn_limit,
        tight=24,
        loose=100,
    ),
    Attempt(
        "expert_consultations",
        channel={"expert_consultations": 10},
        probe=lambda e: engine(e).expert_consultations,
        tight=3,
        loose=10,
    ),
    Attempt(
        "expert_budget_usd",
        channel={"expert_budget_usd": 5.0},
        probe=lambda e: engine(e).expert_budget_micro_usd,
        tight=1_000_000,
        loose=5_000_000,
    ),
    Attempt(
        "approval_scopes",
        workspace={"approval_scopes": ["once"]},
        channel={"approval_scopes": ["once", "channel"]},
        probe=lambda e: engine(e).approval_scopes,
        tight=(ApprovalScope.ONCE,),
        loose=(ApprovalScope.ONCE, ApprovalScope.CHANNEL),
    ),
    Attempt(
        "ask_commands",
        channel={"policy": {"ask_commands": []}},
        probe=lambda e: check(e, "run_command", command="rm -rf /"),
        tight="ask ask_commands 'rm -rf'",
        loose="allow plan_approved",
    ),
    Attempt(
        "mutating_needs_plan",
        channel={"policy": {"mutating_needs_plan": False}},
        probe=lambda e: check(e, "write_file", plan_approved=False, path="a.md", content="x"),
        tight="deny plan_not_approved",
        loose="allow mutating",
    ),
    Attempt(
        "allow_rules",
        channel={"policy": STAR_ALLOW},
        probe=unsafe_calls,
        tight=(
            "ask ask_commands 'rm -rf'",
            "ask ask_commands 'curl'",
            "deny plan_not_approved",
        ),
        loose=(f"allow slack channel {CHANNEL} rules[0] * -> allow",) * 3,
    ),
]


def test_every_layered_setting_has_a_direction_and_every_free_one_says_why() -> None:
    assert set(LAYERED) | set(POLICY_KEYS) <= set(DIRECTIONS)
    source = inspect.getsource(layer_tables)
    body = ast.parse(source).body
    (at,) = [
        i
        for i, node in enumerate(body)
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "DIRECTIONS"
    ]
    docstring = ast.literal_eval(body[at + 1].value)  # type: ignore[attr-defined]
    free = [name for name, direction in DIRECTIONS.items() if direction is Direction.FREE]
    assert free and all(f"``{name}``" in docstring for name in free)


def test_every_setting_that_can_be_loosened_has_an_attempt_below() -> None:
    assert {attempt.key for attempt in ATTEMPTS} == LOOSENABLE


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: a.key)
def test_a_channel_s_loosening_is_refused_and_the_wider_value_holds(
    settings: Settings, attempt: Attempt
) -> None:
    here = attempt.settings(settings)
    assert attempt.probe(here) == attempt.tight
    (said,) = here.refusals.by_name[attempt.key]
    assert said.startswith(f"slack channel {CHANNEL} sets ")
    assert (
        f': refused; a wider layer may allow it with channels_may_loosen = ["{attempt.key}"]'
        in (said)
    )


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: a.key)
@pytest.mark.parametrize("granted_by", ["bot", "workspace"])
def test_the_same_loosening_counts_where_a_wider_layer_lists_it(
    settings: Settings, attempt: Attempt, granted_by: str
) -> None:
    key = [attempt.key]
    if granted_by == "bot":
        here = attempt.settings(settings, bot={"channels_may_loosen": key})
    else:  # the workspace's list, for a setting the bot lets workspaces loosen
        here = attempt.settings(
            settings, bot={"workspaces_may_loosen": key}, channels_may_loosen=key
        )
    assert attempt.probe(here) == attempt.loose
    assert not here.refusals.all()


def test_a_workspace_passes_on_only_what_it_may_loosen_itself(settings: Settings) -> None:
    def timeout(workspace: float, channel: float) -> Effective:
        layers = {"command_timeout": workspace, "channels_may_loosen": ["command_timeout"]}
        slack = {TEAM_ID: {**layers, "channels": {CHANNEL: {"command_timeout": channel}}}}
        return layered(settings, slack=slack).layers().at("slack", TEAM_ID, CHANNEL)

    # A channel may undo its workspace's own tightening, as far as the bot's 120 s ...
    undone = timeout(30.0, 90.0)
    assert (engine(undone).command_timeout, undone.refusals.all()) == (90.0, [])
    # ... but not past the bot's settings: the workspace could not set that itself.
    beyond = timeout(30.0, 600.0)
    assert engine(beyond).command_timeout == 30.0
    (said,) = beyond.refusals.all()
    assert said == (
        f"slack channel {CHANNEL} sets command_timeout = 600.0 (looser than 30.0, from slack "
        f"workspace {TEAM_ID}): refused; slack workspace {TEAM_ID} lists it in "
        "channels_may_loosen, but a workspace or guild passes on only what it may loosen "
        'itself; the bot\'s settings may allow it with channels_may_loosen = ["command_timeout"] '
        '(or workspaces_may_loosen = ["command_timeout"])'
    )


def test_a_workspace_s_loosening_is_refused_unless_the_bot_lists_it(settings: Settings) -> None:
    slack = {TEAM_ID: {"mutating_tools": True, "policy": {"ask_commands": []}}}
    off = layered(settings, mutating_tools=False, slack=slack)
    here = off.layers().at("slack", TEAM_ID, CHANNEL)
    assert check(here, "run_command", command="ls") == "deny mutating_tools_off"
    assert here.refusals.by_name["mutating_tools"] == [
        f"slack workspace {TEAM_ID} sets mutating_tools = True (looser than False, from bot "
        "settings (threadbot.toml)): refused; the bot's settings may allow it with "
        'workspaces_may_loosen = ["mutating_tools"]'
    ]
    grants = ["mutating_tools", "ask_commands"]
    listed = layered(off, workspaces_may_loosen=grants).layers().at("slack", TEAM_ID, CHANNEL)
    assert check(listed, "run_command", command="rm -rf build") == "allow plan_approved"
    # By default a workspace may add approvers (a channel may only narrow them).
    assert Settings.model_fields["workspaces_may_loosen"].default == ["approvers"]


def test_the_bot_s_own_settings_loosen_freely(settings: Settings) -> None:
    s = layered(
        settings,
        approvers=[CAROL],
        command_timeout=3600.0,
        policy={
            "ask_commands": ["terraform apply"],
            "mutating_needs_plan": False,
            "rules": [{"tool": "run_command", "command_prefix": "git push", "decision": "allow"}],
        },
    )
    here = s.layers().at("slack", TEAM_ID, CHANNEL)
    assert check(here, "run_command", command="rm -rf build") == "allow mutating"
    assert check(here, "run_command", command="git push origin main").startswith("allow ")
    assert check(here, "run_command", command="terraform apply").startswith("ask ")
    assert check(here, "write_file", plan_approved=False, path="a", content="x") == (
        "allow mutating"
    )
    assert (engine(here).command_timeout, here.channel_settings.approvers) == (3600.0, (CAROL,))
    assert not here.refusals.all()


def test_a_channel_tightens_freely_and_its_asks_beat_the_bot_s_allow(settings: Settings) -> None:
    channel = {
        "approvers": [BOB],
        "command_timeout": 30.0,
        "policy": {
            "ask_commands": [*DEFAULT_ASK_COMMANDS, "make deploy"],
            "mutating_needs_plan": True,
            "rules": [{"tool": "run_command", "command_prefix": "make lint", "decision": "deny"}],
        },
    }
    s = layered(
        settings,
        approvers=[BOB, CAROL],
        policy={
            "mutating_needs_plan": False,
            "rules": [{"tool": "run_command", "command_prefix": "make", "decision": "allow"}],
        },
        slack={TEAM_ID: {"channels": {CHANNEL: channel}}},
    )
    here = s.layers().at("slack", TEAM_ID, CHANNEL)
    assert not here.refusals.all()
    assert (here.channel_settings.approvers, engine(here).command_timeout) == ((BOB,), 30.0)
    deploy = here.policy.check(
        tool_name="run_command",
        read_only=False,
        arguments={"command": "make deploy"},
        plan_approved=True,
    )
    assert (deploy.decision, deploy.reason) == (
        Permission.ASK,
        "`make deploy` is on the policy's ask list: the policy asks first "
        f"(slack channel {CHANNEL})",
    )
    assert check(here, "run_command", command="make lint").startswith("deny slack channel")
    assert check(here, "run_command", plan_approved=False, command="make test") == (
        f"deny slack channel {CHANNEL} plan_not_approved"
    )
    assert check(here, "run_command", command="make test").startswith("allow bot settings")
    explained = "\n".join(here.explain())
    assert "ask_commands = the default list + ['make deploy']  (slack channel" in explained


# --- what a person sees ----------------------------------------------------------------------


REFUSING = """\
[slack.T0123]
mutating_tools = false

[slack.T0123.channels.C0456]
mutating_tools = true
approvers = ["U0AAA0001"]

[slack.T0123.channels.C0456.policy]
ask_commands = []

[[slack.T0123.channels.C0456.policy.rules]]
tool = "*"
decision = "allow"
"""


def test_settings_explain_shows_each_refused_loosening_beside_its_setting(tmp_path: Path) -> None:
    where = ("--platform", "slack", "--team", "T0123", "--channel", "C0456")
    done = threadbot(tmp_path, "settings", "explain", *where, toml=REFUSING)
    assert done.returncode == 0, done.stderr
    lines = {line.split(" = ")[0]: line for line in done.stdout.splitlines() if " = " in line}
    assert lines["ask_commands"] == (
        "ask_commands = the default list  (defaults); slack channel C0456 sets ask_commands = [] "
        "(looser than the default list, from defaults): refused; a wider layer may allow it "
        'with channels_may_loosen = ["ask_commands"]'
    )
    assert lines["mutating_tools"] == (
        "mutating_tools = False  (slack workspace T0123); slack channel C0456 sets "
        "mutating_tools = True (looser than False, from slack workspace T0123): refused; a "
        'wider layer may allow it with channels_may_loosen = ["mutating_tools"]'
    )
    assert lines["approvers"].startswith(
        "approvers = []  (defaults); slack channel C0456 sets approvers = ['U0AAA0001'] "
        "(looser than [], from defaults): refused;"
    )
    assert lines["channels_may_loosen"] == "channels_may_loosen = []  (defaults)"
    assert lines["workspaces_may_loosen"] == "workspaces_may_loosen = ['approvers']  (defaults)"
    assert (
        "  slack channel C0456 sets the rule * -> allow (an allow rule loosens the policy): "
        'refused; a wider layer may allow it with channels_may_loosen = ["allow_rules"]'
    ) in done.stdout.splitlines()


def test_each_refused_loosening_is_logged_once_at_start(tmp_path: Path) -> None:
    done = threadbot(tmp_path, "console", toml=REFUSING, THREADBOT_DATABASE_URL="memory://")
    assert done.returncode == 0, done.stderr
    logged = [line for line in done.stderr.splitlines() if "refused;" in line]
    assert len(logged) == 4, done.stderr
    assert all(" WARNING bot.engines " in line for line in logged)
    assert any("slack channel C0456 sets ask_commands = []" in line for line in logged)


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            'channels_may_loosen = ["ask_comands"]\n',
            "threadbot.toml: channels_may_loosen[0]: 'ask_comands' is not a setting to "
            "loosen; use allow_rules, approval_scopes, approvers, ask_commands,",
        ),
        (
            '[slack.T0123]\nchannels_may_loosen = ["model"]\n',
            "slack.T0123.channels_may_loosen[0]: 'model' is free: every layer may set it, "
            "no list is needed",
        ),
        (
            '[slack.T0123.channels.C0456]\nchannels_may_loosen = ["approvers"]\n',
            "slack.T0123.channels.C0456.channels_may_loosen: not a setting threadbot knows",
        ),
    ],
)
def test_a_bad_list_of_loosenings_stops_the_bot_at_start(
    tmp_path: Path, toml: str, said: str
) -> None:
    done = threadbot(tmp_path, "console", toml=toml)
    assert done.returncode == 2
    assert said in done.stderr, done.stderr


# --- in a Slack channel ----------------------------------------------------------------------


async def test_in_slack_a_channel_s_star_allow_still_asks_before_rm_rf(settings: Settings) -> None:
    rm = ScriptedCall("run_command", {"command": "rm -rf build"})
    model = ScriptedModel([plan(), ScriptedTurn(calls=[rm])])
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: {"policy": STAR_ALLOW}}}})
    async with slack_workspace(s, model) as ws:
        root = await mention_in(ws, CHANNEL, "clean the build")
        await react_in(ws, CHANNEL, posted(ws, CHANNEL, root, "📋 Plan")["ts"], by=ALICE)
        asked = posted(ws, CHANNEL, root, "🔐 May I run this?")["text"]
        assert "`rm -rf` deletes files recursively: the policy asks first" in asked
        snap = await ws.snapshot(root)
        (record,) = [r for r in snap.tool_calls.values() if r.name == "run_command"]
        assert record.state is ToolState.PENDING_APPROVAL

        await ws.slash("/threadbot", "settings", by=BOB)
        (told,) = [html.unescape(c.args["text"]) for c in ws.calls("chat.postEphemeral")]
        assert (
            f"slack channel {CHANNEL} sets the rule * -> allow (an allow rule loosens the "
            "policy): refused; a wider layer may allow it with "
            'channels_may_loosen = ["allow_rules"]'
        ) in told
        assert not [m for m in bot_posts(ws, CHANNEL, root) if "refused" in str(m.get("text"))]
