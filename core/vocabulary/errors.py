"""Failures raised by the core.

The tree::

    CoreError
    ├── ModelError        the model API failed after its own retries
    │   └── ModelOverloaded   the API said it is overloaded or rate-limited us
    ├── ToolError         a tool could not do what was asked (bad input, path outside
    │                     the workspace, timeout); becomes an error tool result
    ├── ConversationNotFound
    ├── RequestConflict   a pending request was decided or closed meanwhile
    ├── LeaseLost         a run's commit was refused: another process runs the
    │                     conversation now (fencing); nothing was written
    └── IllegalTransition a tool call's state or a conversation's lifecycle was asked
                          to move where its table does not allow (:mod:`core.tool_state`,
                          :mod:`core.vocabulary.lifecycle`; a bug, not a person's doing)

Control flow (a plan to approve, a question to answer, a stop) is not an
exception: a run ends by returning, and a stop is a cancelled task.
"""

from __future__ import annotations


class CoreError(Exception):
    """Base of every failure raised by ``core``."""


class ModelError(CoreError):
    """The model call failed for good; ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class ModelOverloaded(ModelError):
    """The model API is overloaded (HTTP 529) or rate-limited us (HTTP 429)."""


class ToolError(CoreError):
    """A tool refused or failed; the message is what the model is told.

    ``retryable``: trying the same call again may help (a service that did not
    answer, a lock held elsewhere), so a retry policy may try it again
    (:mod:`core.run.tool_step`); False (the default) for a refusal that would come
    out the same (bad input, a path outside the workspace, a missing file).
    """

    def __init__(self, message: str = "", *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ConversationNotFound(CoreError):
    """No conversation has the given id."""


class RequestConflict(CoreError):
    """A change tried to resolve a pending request that was no longer open.

    The store raises it from ``Journal.commit`` and applies nothing of the change;
    it is how compare-and-set decisions tell the second decider "already decided".
    """


class LeaseLost(CoreError):
    """The journal refused a run's commit: this process no longer holds the conversation.

    Raised by ``Journal.commit`` for a commit made under a lease that another
    process has taken over since (it was paused or cut off past the lease's
    expiry). Nothing of the change was written; the run must end at once, without
    writing anything else (the other process carries the conversation on).
    """


class IllegalTransition(CoreError):
    """A tool call record, or a conversation's lifecycle, was asked to move to a state
    its current state cannot reach.

    Raised by :func:`core.tool_state.move` and :func:`core.vocabulary.lifecycle.move`
    before anything is written; the tables of allowed moves are in those modules'
    docstrings. Always a bug in threadbot.
    """


class StaleSnapshot(CoreError):
    """A commit named a journal position that someone else has taken since.

    Raised by ``Journal.commit`` when called with ``after_seq`` and another writer
    (a decision made beside a run, another instance) has appended to the
    conversation's journal since the snapshot the caller holds: the new entries'
    ``seq`` numbers are taken. Nothing of the change was written; the caller
    reloads the conversation and commits again (:func:`core.run.live.commit`).
    """


class AlreadyHandled(CoreError):
    """A commit tried to journal an input (``Change.handled``) that another commit
    journaled already.

    Raised by ``Journal.commit``, applying nothing: with several instances, a reply
    that reached one while another ran the conversation may be taken by both (the
    holder at its next turn, the other once the lease is free: docs/architecture.md,
    "Several instances"); the second one to commit gets this and drops its work.
    """
