"""Whether a delivery from Slack is well-formed enough to hand to slack-bolt.

Slack delivers an Events API body as JSON, a slash command as a form, and an
interaction as a form with one ``payload`` field holding JSON
(https://docs.slack.dev/apis/events-api/#receiving-events,
https://docs.slack.dev/interactivity/implementing-slash-commands,
https://docs.slack.dev/interactivity/handling-user-interaction); over Socket Mode
the same bodies come as the ``payload`` of an envelope
(https://docs.slack.dev/apis/events-api/using-socket-mode/).

slack-bolt 1.30 reads such a body with no check of its shape: ``AsyncBoltRequest``
parses it (``slack_bolt/request/internals.py`` ``parse_body``) and builds the
request context from it (``extract_team_id``, ``extract_user_id`` ...), its
middleware reads ``body["event"]`` (``ignoring_self_events``), and the listener
matchers read ``body["event"]["type"]``, ``body["command"]`` and
``body["actions"][0]["action_id"]`` (``listener_matcher/builtins.py``). A body of
another shape makes bolt raise (a traceback, and a 500 over HTTP) or answer 500.
So each delivery is checked here first, against the fields bolt reads and the
types Slack documents for them; a malformed one is refused (HTTP 400, or an acked
and skipped envelope) and never reaches bolt. Pure functions, no I/O; none raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

ENVELOPE_TYPES = frozenset({"events_api", "interactive", "slash_commands"})
"""Socket Mode envelope types that carry a request for the app."""

_IDS = ("enterprise", "team", "user", "channel")
"""A string id, or an object whose ``id`` is one (``extract_*_id`` in bolt)."""
_ID_STRINGS = ("enterprise_id", "team_id", "user_id", "channel_id")
"""String ids: with those of :data:`_IDS`, each at most :data:`ID_LONGEST` characters
without a space or control character (:func:`_id_problem`)."""
ID_LONGEST = 255
"""Characters, far above any Slack id (``T0123456789``; Slack says ids grow, so no
tighter bound): bolt puts the team's in the query of ``auth.test``, and one of 13,000
newlines made a URL that the Web API refuses, and bolt logged an authorization error."""
_STRINGS = (
    "type",
    "subtype",
    "enterprise_id",
    "team_id",
    "user_id",
    "channel_id",
    "channel_type",
    "thread_ts",
    "bot_id",
    "user_team",
    "command",
    "callback_id",
    "function_execution_id",
    "bot_access_token",
)
_OBJECTS = ("view", "message", "previous_message", "item", "assistant_thread", "container")
"""Objects bolt looks into when they are objects; null is fine too."""
_NESTED = ("message", "previous_message", "item", "assistant_thread")
_LISTS_OF_OBJECTS = ("authorizations", "response_urls", "actions")


@dataclass(frozen=True)
class Malformed:
    """Why a delivery was refused, for the log line."""

    reason: str


def read_http_body(raw: bytes, content_type: str | None) -> str | Malformed:
    """The body of an HTTP request from Slack as text for bolt, or why it is malformed.

    ``content_type`` is the media type without parameters. JSON (by content type,
    or text starting with ``{``, as bolt decides) must be an object; a form must
    carry a ``payload`` holding a JSON object, or be a slash command (``command``)
    or Slack's ``ssl_check``. Then :func:`body_problem` applies.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Malformed("the body is not UTF-8")
    if not text:
        return Malformed("the body is empty")
    json_body = content_type == "application/json" or text.startswith("{")
    body = json_object(text) if json_body else _form(text)
    if isinstance(body, Malformed):
        return body
    problem = body_problem(body)
    return Malformed(problem) if problem else text


def envelope_problem(frame: Mapping[str, Any]) -> str | None:
    """Why a Socket Mode envelope cannot go to bolt, or None when it can.

    ``frame`` is the parsed websocket message; None means it is a
    :class:`~adapters.slack.types.SocketModeEnvelope` as far as bolt reads one:
    ``envelope_id`` a non-empty string, ``type`` one of :data:`ENVELOPE_TYPES`,
    ``payload`` an object that passes :func:`body_problem`.
    """
    envelope_id = frame.get("envelope_id")
    if not isinstance(envelope_id, str) or not envelope_id:
        return "envelope_id is not a string"
    if frame.get("type") not in ENVELOPE_TYPES:
        return "not an events_api, interactive or slash_commands envelope"
    payload = frame.get("payload")
    if not isinstance(payload, Mapping):
        return "payload is not an object"
    return body_problem(payload)


def body_problem(body: Mapping[str, Any]) -> str | None:
    """Why bolt could not read ``body`` (a parsed request body), or None.

    Checked: the context fields (:data:`_IDS`, :data:`_STRINGS`, :data:`_OBJECTS`,
    :data:`_LISTS_OF_OBJECTS`) at the top, in ``event``, in the objects bolt
    looks into and in the first authorization; ``event`` is an object with a
    string ``type`` and ``response_urls`` a list when present; a ``block_actions``
    body has actions, the first with a string ``action_id``, and an
    ``interactive_message`` one action; a ``view_submission`` or ``view_closed``
    has an object ``view``, a submitted view with a callback id has a ``type``,
    and a workflow step's save or edit carries its ``workflow_step``.
    """
    if not isinstance(body, Mapping):
        return "the body is not an object"
    if "event" in body:
        event = body["event"]
        if not isinstance(event, Mapping) or not isinstance(event.get("type"), str):
            return "event is not an object with a string type"
    if "response_urls" in body and not isinstance(body["response_urls"], list):
        return "response_urls is not a list"  # bolt takes its len() (request/internals.py)
    return _fields_problem(body, "body") or _interaction_problem(body)


def _interaction_problem(body: Mapping[str, Any]) -> str | None:
    """What bolt indexes without a check in an interaction of ``body``'s type
    (``slack_bolt/request/payload_utils.py``: ``to_action``, ``to_view``,
    ``to_step``, run for every request), once :func:`_fields_problem` passed."""
    kind = body.get("type")
    actions = body.get("actions")
    if kind == "block_actions":
        if not actions or not isinstance(actions[0].get("action_id"), str):
            return "block_actions without an action that has a string action_id"
    elif kind == "interactive_message" and "callback_id" in body and not actions:
        return "interactive_message without actions"
    elif kind in ("view_submission", "view_closed") and "view" in body:
        view = body["view"]
        if not isinstance(view, Mapping):
            return f"{kind} whose view is not an object"
        if kind == "view_submission" and "callback_id" in view:
            if "type" not in view:
                return "view_submission whose view has no type"
            if view["type"] == "workflow_step" and "workflow_step" not in body:
                return "a workflow_step view_submission without workflow_step"
    elif kind == "workflow_step_edit" and "callback_id" in body and "workflow_step" not in body:
        return "workflow_step_edit without workflow_step"
    return None


def _fields_problem(node: Mapping[str, Any], where: str, depth: int = 0) -> str | None:
    for key in _IDS:
        value = node.get(key)
        if isinstance(value, Mapping):
            value = value.get("id")
        if value is not None and not isinstance(value, str):
            return f"{where}.{key} is not a string id"
        if isinstance(value, str) and (problem := _id_problem(value)):
            return f"{where}.{key} {problem}"
    for key in _STRINGS:
        if node.get(key) is not None and not isinstance(node[key], str):
            return f"{where}.{key} is not a string"
    for key in _ID_STRINGS:
        if isinstance(value := node.get(key), str) and (problem := _id_problem(value)):
            return f"{where}.{key} {problem}"
    for key in _OBJECTS:
        if node.get(key) is not None and not isinstance(node[key], Mapping):
            return f"{where}.{key} is not an object"
    for key in _LISTS_OF_OBJECTS:
        value = node.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(item, Mapping) for item in value)
        ):
            return f"{where}.{key} is not a list of objects"
    return _nested_problem(node, where, depth)


def _id_problem(value: str) -> str | None:
    """Why ``value`` is no Slack id (:data:`ID_LONGEST`), or None."""
    if len(value) > ID_LONGEST:
        return f"is {len(value)} characters long, not an id"
    if any(c.isspace() or not c.isprintable() for c in value):
        return "holds a space or a control character, not an id"
    return None


def _nested_problem(node: Mapping[str, Any], where: str, depth: int) -> str | None:
    if depth >= 2:  # bolt looks two levels down at most (event.message.user)
        return None
    nested = [(key, node.get(key)) for key in ("event", "view", *_NESTED)]
    authorizations = node.get("authorizations")
    if isinstance(authorizations, list) and authorizations:
        nested.append(("authorizations[0]", authorizations[0]))
    for key, value in nested:
        if isinstance(value, Mapping):
            problem = _fields_problem(value, f"{where}.{key}", depth + 1)
            if problem:
                return problem
    return None


def json_object(text: str) -> Mapping[str, Any] | Malformed:
    """``text`` parsed as a JSON object, or why it is not one (not JSON, or not an object).

    Too deep a nesting (``RecursionError``) counts as not JSON.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return Malformed("the body is not JSON")
    return value if isinstance(value, dict) else Malformed("the JSON body is not an object")


def _form(text: str) -> Mapping[str, Any] | Malformed:
    fields = dict(parse_qsl(text, keep_blank_values=True))
    if "payload" in fields:
        payload = json_object(fields["payload"])
        if isinstance(payload, Malformed):
            return Malformed(f"the form's payload: {payload.reason.removeprefix('the ')}")
        return payload
    if "command" in fields or "ssl_check" in fields:
        return fields
    return Malformed("a form with neither payload nor command")
