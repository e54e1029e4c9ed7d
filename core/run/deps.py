"""What a run uses (:class:`RunDeps`), apart from what it knows (:class:`core.run.state.Run`).

The engine builds its deps once and hands them, with each run's state, to the
turn (:class:`core.run.turn.Turns`) and the tool calls
(:class:`core.run.tool_calls.ToolCalls`); nothing in them belongs to one
conversation. The tool policy is the run's settings' (a channel may have its own:
``Run.settings.tool_policy``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from core.faults import NO_FAULTS, Faults
from core.files import FileReader
from core.models.base import Model
from core.outputs import OutputCache
from core.run.compose import Step
from core.run.preview import NO_PREVIEW, AnswerPreview
from core.run.settings import ChannelSpend
from core.run.slots import UNLIMITED, StepSlots
from core.secrets import NO_SECRETS, Redactor
from core.tools.base import Toolbox
from core.tools.workspaces import GitWorkspaces, Workspaces
from core.vocabulary.approvals import RulesInForce
from core.vocabulary.inputs import Inbox
from core.vocabulary.journal import Journal
from core.workflows.loading import WorkflowLibrary, shipped_library

Composer = Callable[["RunDeps", Inbox | None], Step]
"""Builds the steps one run goes through from the run's deps and its inbox (the messages
that come while it works): the agent of :mod:`core.run.agent` by default."""


def _never() -> bool:
    return False


@dataclass(frozen=True, kw_only=True)
class RunDeps:
    """The journal a run commits to, the model it asks, the tools it runs, and the rest.

    ``workflows``: the workflows a conversation may run (:mod:`core.run.workflow`;
    by default the shipped ones); ``outputs`` keeps tool outputs past the settings'
    ``output_limit`` whole (None: cut to head and tail); ``files`` reads the files
    shared with a message;
    ``workspaces`` prepares a conversation's workspace (a clone) before a tool runs
    in it; ``redactor`` takes the bot's secrets out of every result and note;
    ``faults`` kills the process at a named point (crash tests); ``channel_spend``
    tells what a conversation's channel spent today (None: only the conversation's
    own calls count); ``rules`` the approvals remembered for a run or a channel, read
    each time calls ask (:mod:`core.vocabulary.approvals`; None: none);
    ``suspended()`` True means: start no new step (the process is stopping);
    ``compose`` builds what a run goes through (None: the agent,
    :func:`core.run.agent.agent`); ``slots`` holds a slot around each model call and
    command (:mod:`core.run.slots`; by default nothing waits); ``preview`` is told the
    answer while the model writes it (:mod:`core.run.preview`; by default nobody).
    """

    journal: Journal
    model: Model
    toolbox: Toolbox
    workflows: WorkflowLibrary = field(default_factory=shipped_library)
    outputs: OutputCache | None = None
    files: FileReader
    workspaces: Workspaces = field(default_factory=GitWorkspaces)
    redactor: Redactor = NO_SECRETS
    faults: Faults = NO_FAULTS
    channel_spend: ChannelSpend | None = None
    rules: RulesInForce | None = None
    suspended: Callable[[], bool] = _never
    compose: Composer | None = None
    slots: StepSlots = UNLIMITED
    preview: AnswerPreview = NO_PREVIEW
