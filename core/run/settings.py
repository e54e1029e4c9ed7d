"""The limits, the model and the system prompt a run works with, per conversation.

A team may give each channel its own model, instructions, tool rules and limits
(the bot's settings layers). The engine asks for a conversation's
:class:`EngineSettings` once per run (:data:`SettingsLookup`; the run holds them,
:attr:`core.run.state.Run.settings`), so core never learns where a conversation
lives: the caller's lookup does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import assert_never

from core.policy.policy import ToolPolicy
from core.pricing import Budgets, Price, Spend
from core.retry import NoRetry, RetryPolicy
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.entries import ModelRole

DEFAULT_SYSTEM_PROMPT = """\
You are threadbot, an agent that works for a team from a chat thread. People talk
to you in the thread; their messages start with their name. Keep messages short
and concrete. Work only inside the conversation's workspace with your tools.
"""


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Settings of a run: model turns per workflow step, tokens per response, tool limits
    (seconds, chars, MB), request lifetime (seconds), the model and each role's, the
    instructions and the tool policy.
    """

    step_turn_limit: int = 24
    """Model turns since the run entered its workflow step, or since a person last gave
    it work (the later), after which it asks whether to go on (:mod:`core.run.agent`);
    at least 1."""
    max_tokens: int = 4096
    failure_limit: int = 2
    """Failed commands in a row after which the run asks the people in the thread for help
    (:mod:`core.run.escalation`); at least 1."""
    running_note_every: float | None = None
    """Seconds between two progress notes that a call still runs (None: no such note)."""
    command_timeout: float = 120.0
    """Wall-clock seconds a command may run."""
    command_cpu_seconds: float | None = None
    """CPU seconds each process of a command may use (``RLIMIT_CPU``); None: no cap."""
    command_memory_mb: int | None = 2048
    """Megabytes a command's processes may use together (its cgroup); None: no cap."""
    command_processes: int | None = 256
    """Processes (threads included) a command may run at once (its cgroup); None: no cap."""
    output_limit: int = 16_000
    """Characters of a tool output the model reads; a longer one is previewed (head and
    tail, with its id) when the engine keeps outputs (:mod:`core.outputs`)."""
    context_window: int = 200_000
    """Tokens the model's context holds (its window)."""
    compact_at: float = 0.8
    """Share of ``context_window`` past which the oldest turns are summarized."""
    output_store_limit: int = 1_000_000
    """Characters of a tool output kept whole when outputs are kept (a command's output
    past it keeps its head and tail)."""
    request_ttl: float = 24 * 3600.0
    """Seconds a pending request waits before it expires (a reminder at half)."""
    mention_requester: bool = True
    """Whether the requester is mentioned on the plan and the question that wait for them
    and on the final answer (:mod:`core.run.addressed`)."""
    file_text_limit: int = 50_000
    """Characters of the text files shared with one message that the model reads inline;
    the files past it are saved into the workspace (:mod:`core.files`)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    instructions: str = ""
    """The team's own instructions, sent after the system prompt (a channel's, say)."""
    model: str | None = None
    """The model id to ask; None: the model's own default."""
    planner_model: str | None = None
    """The planner's model (the planning position's calls); None: :attr:`model`."""
    executor_model: str | None = None
    """The executor's model (the executing position's calls); None: :attr:`model`."""
    expert_model: str | None = None
    """The expert's model; None: no expert (nothing is delegated to one, and ``ask_expert``
    is not offered)."""
    expert_consultations: int = 3
    """``ask_expert`` consultations a conversation may make (answered ones count; 0: the
    tool is not offered); past it a call is refused and fails (:mod:`core.run.consultation`)."""
    expert_budget_micro_usd: int | None = 1_000_000
    """Micro-dollars a conversation's consultations may cost together before the next one
    is refused (the expert's priced calls count; None: no cap in dollars)."""
    fallback_models: tuple[str, ...] = ()
    """Models asked in turn when the model is overloaded (see ``ModelRequest.fallbacks``)."""
    git_repo: str | None = None
    """The repository each conversation's workspace is cloned from (None: an empty one)."""
    tool_policy: ToolPolicy = field(default_factory=ToolPolicy)
    approval_scopes: tuple[ApprovalScope, ...] = (ApprovalScope.ONCE,)
    """How far a person's approval of a tool call may reach here (:mod:`core.vocabulary.
    approvals`): once always; for the run and always in the channel where offered (the
    bot offers them only where commands are sandboxed)."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """The price entry of each model id (a model without one is not costed)."""
    budgets: Budgets = field(default_factory=Budgets)
    """The conversation's and its channel's daily budgets (none by default)."""
    cgroup_root: Path = Path("/sys/fs/cgroup")
    """Where a command's cgroup left over by a crash is looked for (the bot's setting)."""
    tool_retry: RetryPolicy = field(default_factory=NoRetry)
    """How a failed tool call that may be repeated is tried again (:mod:`core.retry`;
    by default it is not: its error is its result)."""
    context_strategy: str = "flat"
    """The run's context strategy (``flat``, ``task_list``, ``task_tree``, ``none``:
    :mod:`core.contexts`); ``flat`` adds nothing to what the model reads."""
    context_keep_turns: int = 2
    """Model turns compaction keeps whole under that strategy (``none`` keeps none)."""
    workflow: str = "default"
    """The workflow a request starts when it asks for none (:mod:`core.run.workflow`)."""
    workflows: tuple[str, ...] = ("default", "chat", "validate-fix")
    """The workflows a request may ask for with ``workflow=NAME`` (``workflow`` is
    always allowed too)."""
    check_command: str = ""
    """The command a workflow's ``{check_command}`` stands for (``validate-fix`` runs it;
    empty: such a workflow refuses to start, saying the setting is missing)."""

    def __post_init__(self) -> None:
        if self.step_turn_limit < 1:
            raise ValueError(f"step_turn_limit must be at least 1, not {self.step_turn_limit}")
        if self.failure_limit < 1:
            raise ValueError(f"failure_limit must be at least 1, not {self.failure_limit}")
        if self.expert_consultations < 0:
            raise ValueError(
                f"expert_consultations must be 0 or more, not {self.expert_consultations}"
            )

    @property
    def consults_expert(self) -> bool:
        """Whether ``ask_expert`` is offered: an expert model is set and consultations are
        allowed (:func:`core.tools.control.offered`)."""
        return self.expert_model is not None and self.expert_consultations > 0

    def model_of(self, role: ModelRole) -> str | None:
        """The model id a call of ``role`` asks: the planner's and the executor's own, else
        :attr:`model` (None: the model's own default); the expert's, None when there is
        no expert."""
        match role:
            case "planner":
                return self.planner_model or self.model
            case "executor":
                return self.executor_model or self.model
            case "expert":
                return self.expert_model
            case _:
                assert_never(role)

    @property
    def system(self) -> str:
        """The system prompt with the team's instructions after it."""
        if not self.instructions.strip():
            return self.system_prompt
        return f"{self.system_prompt}\n{self.instructions.strip()}\n"


SettingsLookup = Callable[[str], Awaitable[EngineSettings]]
"""The settings of one conversation, by its id (the bot resolves them from where it lives)."""

ChannelSpend = Callable[[str, datetime], Awaitable[Spend]]
"""What the model calls in the channel of a conversation (by its id) spent since a time
(UTC), this conversation's included (the bot knows where conversations live)."""
