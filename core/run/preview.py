"""The turn's preview: the model's text and ``finish``'s ``answer`` as the model writes
them, told to whoever shows them.

A turn of the conversation's own run (not an expert's, in a delegation) where ``finish``
leads straight to an ``end`` state is previewed (:func:`core.run.model_turn`):

- its text (the prose before its tool calls, or a whole reply in prose) is told as it
  grows (:meth:`AnswerPreview.wrote`, the text so far, stripped): it becomes the turn's
  progress note (every agent state offers ``finish``, so a reply in prose is nudged,
  :mod:`core.run.nudges`), whose row finalises what was shown;
- the ``answer`` of its ``finish`` call is read out of the call's input JSON as it is
  written (:class:`core.models.base.ToolInputDelta`; the Messages API's
  ``input_json_delta``, https://docs.anthropic.com/en/docs/build-with-claude/streaming;
  :class:`AnswerPieces`, :func:`partial_answer`) and told as it grows
  (:meth:`AnswerPreview.grew`);
- at the turn's end, whether the response came whole (:meth:`AnswerPreview.ended`; a
  response that broke off is asked again, and what the next one writes goes on in the
  same preview, or, where it differs, the row edits the whole text in).

The preview is only shown: nothing here is journaled, and the note and the answer are
committed and delivered as before (docs/architecture.md "Streamed answers").

Pure and synchronous: a preview must not block or fail a run (the hub's takes the
text and returns).
"""

from __future__ import annotations

from typing import Protocol

from pydantic_core import from_json

ANSWER_TOOL = "finish"
"""The control call whose ``answer`` input is the final answer (:mod:`core.tools.control`)."""


class AnswerPreview(Protocol):
    """Where a conversation's turn goes while the model writes it.

    ``wrote(conversation_id, text)``: the turn's text so far (each call a longer text,
    stripped); ``grew(conversation_id, text)``: its ``finish`` answer so far (each call a
    longer text); ``ended(conversation_id, whole)``: the turn ended, ``whole`` when the
    response came to its end (its note or answer row finalises what was shown), else
    False (the response broke off: the turn is asked again). None may raise or block."""

    def wrote(self, conversation_id: str, text: str) -> None:
        """The text of ``conversation_id``'s turn written so far is ``text``."""
        ...

    def grew(self, conversation_id: str, text: str) -> None:
        """The answer of ``conversation_id`` written so far is ``text``."""
        ...

    def ended(self, conversation_id: str, whole: bool) -> None:
        """The turn that wrote ``conversation_id``'s preview ended (see the class)."""
        ...


class _NoPreview:
    def wrote(self, conversation_id: str, text: str) -> None:
        return None

    def grew(self, conversation_id: str, text: str) -> None:
        return None

    def ended(self, conversation_id: str, whole: bool) -> None:
        return None


NO_PREVIEW: AnswerPreview = _NoPreview()
"""Shows nothing (the console, tests, a runner without the hub's preview)."""


class AnswerPieces:
    """The ``finish`` input of one turn, piece by piece: :meth:`add` returns the answer
    so far when it grew, else None. One per model turn."""

    def __init__(self) -> None:
        self._written: dict[str, list[str]] = {}
        self._shown = ""

    def add(self, call_id: str, name: str, piece: str) -> str | None:
        """Take one piece of ``call_id``'s input JSON; the answer so far when it grew."""
        if name != ANSWER_TOOL:
            return None
        written = self._written.setdefault(call_id, [])
        written.append(piece)
        if len(self._written) > 1:
            return None  # two finish calls in one turn: neither is shown
        text = partial_answer("".join(written))
        if text is None or len(text) <= len(self._shown):
            return None
        self._shown = text
        return text

    @property
    def shown(self) -> str:
        """The longest answer told so far ("" when none)."""
        return self._shown


def partial_answer(written: str) -> str | None:
    """The ``answer`` string of a JSON object written up to here, as far as it goes.

    ``written`` is a prefix of an object's JSON (``{"answer": "The fix is`` ...).
    Returns the decoded characters of the top-level ``answer`` string read so far (an
    escape or a surrogate pair cut in the middle is left for the next piece), or None
    while its key has not come, or when it is not a string. Read by pydantic-core's
    partial JSON parser (``from_json(allow_partial="trailing-strings")``:
    https://docs.pydantic.dev/latest/concepts/json/#partial-json-parsing)."""
    try:
        value = from_json(written, allow_partial="trailing-strings")
    except ValueError:
        return None
    answer = value.get("answer") if isinstance(value, dict) else None
    return answer if isinstance(answer, str) else None
