"""Button actions: what a button does, as a tagged union, and the value it carries.

A button's value is the serialised action, never a string to split
(docs/architecture.md, "How the code is written"). The actions are small frozen
models joined by ``kind``:

- :class:`ApproveButton` / :class:`RejectButton`: decide a request (a plan, a go-on or retry
  question), or one call of a tool approval (``call``, numbered from 1). Without
  ``request`` they decide the request the pressed message was posted for, as a
  reaction on it does.
- :class:`WiderApproveButton`: allow one call of a tool approval for the rest of the run
  (``run``) or always in the channel (``channel``): the approval scopes of
  :mod:`core.vocabulary.approvals`, the kind naming the scope.
- :class:`StopButton`: stop a conversation (the list ``/stop`` answers with); without
  ``conversation``, the conversation of the pressed message (Discord's plan card).
- :class:`ChooseButton`: pick option ``option`` (from 1) of a question (``ask_user``
  with options); without ``request``, the question of the pressed message.
- :class:`AnswerButton`: answer a question in words. Discord's adapter adds it under a
  question with options and opens a form (a modal) for it itself
  (``adapters/discord/modals.py``); it never reaches the hub as a decision.
- :class:`FeedbackButton`: a person's 👍 (``positive``) or 👎 on the answer of the
  pressed message's conversation (docs/architecture.md, "What a person sees"); anyone
  in the channel may press it, and a later press by the same person replaces theirs.

:func:`encode` writes ``tb1:`` and the action's JSON with one-letter keys, at most
:data:`MAX_CHARS` characters: Discord's limit for a component's ``custom_id``
(https://discord.com/developers/docs/components/reference, "Button": ``custom_id``
is 1 to 100 characters); Slack allows more (``action_id`` 255, ``value`` 2,000:
https://docs.slack.dev/reference/block-kit/block-elements/button-element). Ids of
up to 64 characters (letters, digits, ``_.:-``) fit: the store's request and conversation
ids are at most that.
For example::

    tb1:{"k":"approve","r":"8f2c1d9e0a7b"}
    tb1:{"k":"reject","r":"8f2c1d9e0a7b","n":2}
    tb1:{"k":"run","r":"8f2c1d9e0a7b","n":2}
    tb1:{"k":"channel","r":"8f2c1d9e0a7b","n":2}
    tb1:{"k":"stop","c":"0f1e2d3c4b5a69788796a5b4c3d2e1f0"}
    tb1:{"k":"stop"}
    tb1:{"k":"choose","r":"8f2c1d9e0a7b","o":2}
    tb1:{"k":"answer","r":"8f2c1d9e0a7b"}
    tb1:{"k":"feedback","p":true}

:func:`decode` is the one reader of a pressed button's value. ``tb1:`` is the
version: a later encoding takes the next prefix and this reader stays. Buttons
posted before the encoding existed keep working: ``approve:<request>``,
``reject:<request>``, ``allow:<request>:<call>``, ``deny:<request>:<call>``,
``stop:<conversation>`` and ``threadbot:approve:plan:<version>`` (or ``reject``:
the plan on the pressed message) decode to the same actions.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

PREFIX = "tb1:"
"""The version of the encoding :func:`encode` writes."""
MAX_CHARS = 100
"""The longest value a button may carry: Discord's ``custom_id`` limit."""
MAX_ID = 64
"""The longest request or conversation id an action holds (so that it fits)."""
ID_PATTERN = r"^[A-Za-z0-9_.:-]+$"
"""The characters of an id an action holds: none that JSON would escape (so that it fits)."""


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class ApproveButton(_Action):
    """Yes to ``request`` (None: the request of the pressed message), or to its ``call``."""

    kind: Literal["approve"] = Field("approve", alias="k")
    request: str | None = Field(None, alias="r", max_length=MAX_ID, pattern=ID_PATTERN)
    call: int | None = Field(None, alias="n", ge=0, le=999)


class RejectButton(_Action):
    """No to ``request`` (None: the request of the pressed message), or to its ``call``."""

    kind: Literal["reject"] = Field("reject", alias="k")
    request: str | None = Field(None, alias="r", max_length=MAX_ID, pattern=ID_PATTERN)
    call: int | None = Field(None, alias="n", ge=0, le=999)


class WiderApproveButton(_Action):
    """Yes to call ``call`` of the tool approval ``request`` (None: the pressed message's)
    for the rest of the run (``kind`` ``run``) or always in the channel (``channel``)."""

    kind: Literal["run", "channel"] = Field(alias="k")
    request: str | None = Field(None, alias="r", max_length=MAX_ID, pattern=ID_PATTERN)
    call: int | None = Field(None, alias="n", ge=0, le=999)


class StopButton(_Action):
    """Stop ``conversation`` (None: the conversation of the pressed message)."""

    kind: Literal["stop"] = Field("stop", alias="k")
    conversation: str | None = Field(None, alias="c", max_length=MAX_ID, pattern=ID_PATTERN)


class ChooseButton(_Action):
    """Option ``option`` (from 1) of the question ``request`` (None: the pressed message's)."""

    kind: Literal["choose"] = Field("choose", alias="k")
    request: str | None = Field(None, alias="r", max_length=MAX_ID, pattern=ID_PATTERN)
    option: int = Field(alias="o", ge=1, le=9)


class AnswerButton(_Action):
    """Answer the question ``request`` in words (None: the pressed message's)."""

    kind: Literal["answer"] = Field("answer", alias="k")
    request: str | None = Field(None, alias="r", max_length=MAX_ID, pattern=ID_PATTERN)


class FeedbackButton(_Action):
    """Feedback on the answer of the pressed message's conversation: good (``positive``)
    or not."""

    kind: Literal["feedback"] = Field("feedback", alias="k")
    positive: bool = Field(alias="p")


ButtonAction = Annotated[
    ApproveButton
    | RejectButton
    | WiderApproveButton
    | StopButton
    | ChooseButton
    | AnswerButton
    | FeedbackButton,
    Field(discriminator="kind"),
]
"""What a button does."""
_actions: TypeAdapter[ButtonAction] = TypeAdapter(ButtonAction)


def encode(action: ButtonAction) -> str:
    """The value a button carries for ``action``: ``tb1:`` and its compact JSON.

    At most :data:`MAX_CHARS` characters for any valid action; raises
    ``ValueError`` otherwise (a guard: the models' limits keep it from happening).
    """
    value = PREFIX + _actions.dump_json(action, by_alias=True, exclude_none=True).decode()
    if len(value) > MAX_CHARS:
        raise ValueError(f"a button value is at most {MAX_CHARS} characters, got {value!r}")
    return value


def decode(value: str) -> ButtonAction | None:
    """The action a pressed button's ``value`` carries, in any form ever posted; None
    for a value no threadbot wrote (or another version's)."""
    if value.startswith(PREFIX):
        try:
            return _actions.validate_json(value[len(PREFIX) :])
        except ValidationError:
            return None
    try:
        return _legacy(value)
    except ValidationError:
        return None


def _legacy(value: str) -> ButtonAction | None:
    """Values posted before :data:`PREFIX`: ``verb:target`` (see the module docstring)."""
    verb, _, target = value.partition(":")
    match verb:
        case "approve" | "reject" if target:
            return _decision(verb == "approve", request=target)
        case "allow" | "deny":
            request, _, number = target.rpartition(":")
            if not request:
                return None
            call = int(number) if number.isdigit() else None
            return _decision(verb == "allow", request=request, call=call)
        case "stop" if target:
            return StopButton(conversation=target)
        case "threadbot":
            choice, _, about = target.partition(":")
            if choice in ("approve", "reject") and about.partition(":")[0] == "plan":
                return _decision(choice == "approve")
    return None


def _decision(
    approve: bool, *, request: str | None = None, call: int | None = None
) -> ButtonAction:
    return (
        ApproveButton(request=request, call=call)
        if approve
        else RejectButton(request=request, call=call)
    )
