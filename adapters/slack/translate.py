"""Pure translators for inbound Slack payloads: a payload in, a neutral event out.

No I/O and no slack-bolt or slack-sdk objects: each function takes the payload as
Slack delivers it (a parsed JSON body or form) and the bot's own
:class:`BotIdentity`, and returns a :mod:`conversations.events` event, or None
when the payload is not for the conversations (the bot's own echo, an edit, a
handshake, a malformed event). Outbound rendering is in
:mod:`adapters.slack.outbound`.

Delivery keys, which the hub records to drop duplicates:

- a message: ``slack:{team}:{channel}:{ts}``, the message key, so the
  ``app_mention`` and the ``message`` event Slack sends for one message, and any
  retry of either, give the same key;
- a reaction: ``slack:event:{event_id}`` (a retry keeps its ``event_id``);
- a slash command: ``slack:command:{trigger_id}``;
- a button: ``slack:action:{trigger_id}`` (``action_ts`` when there is no trigger).

A payload that gives no event is logged with its payload type and delivery key
(or ``no key``): at DEBUG when it is left out on purpose (the bot's echo, an
edit), at WARNING when it is malformed. No translator raises, whatever the
payload holds.

Slack escapes ``&``, ``<`` and ``>`` in message text as HTML entities
(https://docs.slack.dev/messaging/formatting-message-text#escaping); inbound text
is unescaped, so the conversation sees what the person typed. Mentions and links
stay in Slack's ``<@U123>`` / ``<https://...|label>`` syntax.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Never

from adapters.slack.mentions import mentions_bot, without_mentions
from conversations.emoji import normalize
from conversations.events import (
    Author,
    ButtonPressed,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
)

log = logging.getLogger(__name__)

PLATFORM = "slack"

_USER_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
"""Message subtypes a person posts (https://docs.slack.dev/reference/events/message)."""

_LABEL_LIMIT = 80
"""Characters of a payload's own value kept in a log line (a fuzzer sends megabytes)."""


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is in one workspace, to recognise its own events.

    ``user_id`` (``U...``), ``bot_id`` (``B...``) and ``team_id`` come from
    ``auth.test`` (https://docs.slack.dev/reference/methods/auth.test); ``app_id``
    (``A...``) is not in that answer: take it from ``bots.info`` or the
    ``api_app_id`` of the app's own payloads. An empty field matches nothing.
    """

    user_id: str
    bot_id: str
    app_id: str
    team_id: str

    @classmethod
    def from_auth_test(cls, answer: Mapping[str, Any], *, app_id: str = "") -> BotIdentity:
        """The identity in an ``auth.test`` answer (``user_id``, ``bot_id``, ``team_id``)."""
        return cls(
            user_id=_text(answer, "user_id") or "",
            bot_id=_text(answer, "bot_id") or "",
            app_id=app_id,
            team_id=_text(answer, "team_id") or "",
        )


def inbound_event(
    body: Mapping[str, Any], me: BotIdentity, *, allow_bots: bool = False
) -> InboundEvent | None:
    """Translate an Events API body into a neutral event, or None to ignore it.

    ``body`` is ``{"type": "event_callback", "team_id", "event_id", "event": {...}}``
    (https://docs.slack.dev/apis/events-api/#callback-field); the ``payload`` of a
    Socket Mode ``events_api`` envelope is the same body. Handled events:

    - ``app_mention`` (https://docs.slack.dev/reference/events/app_mention): a
      :class:`MessagePosted` with ``mentions_bot=True``;
    - ``message`` with no subtype, ``thread_broadcast`` or ``file_share``
      (https://docs.slack.dev/reference/events/message): a :class:`MessagePosted`.
      Either mentions the bot when its rich-text blocks hold the bot's user
      outside code and quotes (its text when it has no rich text:
      :func:`adapters.slack.mentions.mentions_bot`), or it is a DM
      (``channel_type`` ``im``). The bot's mention is removed from the text
      outside code and quotes;
    - ``reaction_added`` / ``reaction_removed`` on a message
      (https://docs.slack.dev/reference/events/reaction_added): a
      :class:`ReactionChanged` with the normalized emoji name.

    None for: ``url_verification`` and other non-callback bodies; the bot's own
    messages and reactions (matched on ``user``, ``bot_id``, ``app_id`` or
    ``bot_profile.app_id``); other bots' messages unless ``allow_bots`` (then
    ``Author.is_bot``); every other subtype, including ``message_changed``
    (https://docs.slack.dev/reference/events/message/message_changed: an edit
    never starts or continues a conversation) and ``message_deleted``; and events
    missing a field they need (user, text, ts, channel). Never raises on a
    malformed body.
    """
    if not isinstance(body, Mapping):
        return _dropped(f"body {_label(body)}", None, "not an object", malformed=True)
    event = body.get("event")
    kind = _event_kind(body)
    event_key = f"slack:event:{body['event_id']}" if _text(body, "event_id") else None
    if body.get("type") != "event_callback" or not isinstance(event, Mapping):
        return _dropped(kind, event_key, "not an event callback")
    team = _text(body, "team_id") or me.team_id
    if not team:
        return _dropped(kind, event_key, "no team_id", malformed=True)
    match event.get("type"):
        case "app_mention" | "message":
            return _message(event, team, me, allow_bots, kind)
        case "reaction_added" | "reaction_removed":
            return _reaction(event, _text(body, "event_id"), team, me)
        case _:
            return _dropped(kind, event_key, "an event the conversations do not take")


def command_event(form: Mapping[str, Any], me: BotIdentity) -> CommandInvoked | None:
    """Translate a slash command into :class:`CommandInvoked`, or None if fields are missing.

    ``form`` is the form-encoded body parsed into single values, or the ``payload``
    of a Socket Mode ``slash_commands`` envelope (the same fields)
    (https://docs.slack.dev/interactivity/implementing-slash-commands). ``name`` is
    ``command`` without its slash, ``args`` is ``text``. Slack sends no thread with
    a slash command, even one typed in a thread, so ``ref.thread`` is None and the
    hub must work out which conversation of the channel is meant. None (logged)
    for a malformed form; never raises.
    """
    if not isinstance(form, Mapping):
        return _dropped(f"slash command {_label(form)}", None, "not an object", malformed=True)
    command = _text(form, "command")
    channel = _text(form, "channel_id")
    user = _text(form, "user_id")
    trigger = _text(form, "trigger_id")
    team = _text(form, "team_id") or me.team_id
    key = f"slack:command:{trigger}" if trigger else None
    name = (command or "").removeprefix("/")
    if not (name and channel and user and trigger and team):
        return _dropped("slash command", key, "a field is missing", malformed=True)
    args = form.get("text")
    return CommandInvoked(
        delivery_key=f"slack:command:{trigger}",  # trigger is set: checked above
        ref=PlatformRef(platform=PLATFORM, workspace=team, channel=channel, user=user),
        author=_person(user),
        name=name,
        args=args.strip() if isinstance(args, str) else "",
    )


def action_event(payload: Mapping[str, Any], me: BotIdentity) -> ButtonPressed | None:
    """Translate a ``block_actions`` payload into :class:`ButtonPressed` for ``actions[0]``.

    ``payload`` is the JSON in the ``payload`` form field of an interactivity
    request, or the ``payload`` of a Socket Mode ``interactive`` envelope
    (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload).
    ``action`` is the action's ``value``, else its ``action_id``; ``ref.message`` is
    ``container.message_ts``, ``ref.thread`` the message's ``thread_ts`` (else the
    container's), ``ref.channel`` is ``channel.id`` (else ``container.channel_id``).
    None (logged) for other payload types, the bot's own clicks and missing
    fields; never raises.
    """
    if not isinstance(payload, Mapping):
        return _dropped(f"interaction {_label(payload)}", None, "not an object", malformed=True)
    kind = f"interaction {_label(payload.get('type'))}"
    trigger = _text(payload, "trigger_id")
    if payload.get("type") != "block_actions":
        return _dropped(kind, f"slack:action:{trigger}" if trigger else None, "not a button")
    actions = payload.get("actions")
    first = actions[0] if isinstance(actions, list) and actions else None
    user = _text(_mapping(payload, "user"), "id")
    first = first if isinstance(first, Mapping) else {}
    key = trigger or _text(first, "action_ts")
    delivery_key = f"slack:action:{key}" if key else None
    if user is not None and user == me.user_id:
        return _dropped(kind, delivery_key, "the bot's own click")
    action = _text(first, "value") or _text(first, "action_id")
    container = _mapping(payload, "container")
    channel = _text(_mapping(payload, "channel"), "id") or _text(container, "channel_id")
    message_ts = _text(container, "message_ts")
    team = (
        _text(_mapping(payload, "team"), "id")
        or _text(_mapping(payload, "user"), "team_id")
        or me.team_id
    )
    if not (user and action and channel and message_ts and delivery_key and team):
        return _dropped(kind, delivery_key, "a field is missing", malformed=True)
    thread = _text(_mapping(payload, "message"), "thread_ts") or _text(container, "thread_ts")
    return ButtonPressed(
        delivery_key=delivery_key,
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=team,
            channel=channel,
            thread=thread,
            message=message_ts,
            user=user,
        ),
        author=_person(user),
        action=action,
    )


def unescape(text: str) -> str:
    """Undo Slack's escaping of ``&``, ``<``, ``>`` (``&amp;lt;`` gives ``&lt;``)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _message(
    event: Mapping[str, Any], team: str, me: BotIdentity, allow_bots: bool, kind: str
) -> MessagePosted | None:
    channel, ts = _text(event, "channel"), _text(event, "ts")
    key = f"slack:{team}:{channel}:{ts}" if channel and ts else None
    subtype = event.get("subtype")
    is_bot = bool(_text(event, "bot_id")) or subtype == "bot_message"
    if subtype is not None and not (subtype == "bot_message" or _is_user_subtype(subtype)):
        return _dropped(kind, key, "a subtype that is not a new message")
    if event.get("hidden") or _is_me(event, me) or (is_bot and not allow_bots):
        return _dropped(kind, key, "hidden, the bot's own, or another bot's")
    person = _text(event, "user")
    user = person or (_text(event, "bot_id") if is_bot else None)
    text = event.get("text")
    if not (user and key) or not isinstance(text, str):
        return _dropped(kind, key, "no user, channel, ts or text", malformed=True)
    return MessagePosted(
        delivery_key=key,
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=team,
            channel=channel,
            thread=_text(event, "thread_ts"),
            message=ts,
            user=user,
        ),
        author=_bot(event, person, user) if is_bot else _person(user),
        text=unescape(without_mentions(text, me.user_id)).strip(),
        mentions_bot=event.get("channel_type") == "im" or mentions_bot(event, me.user_id),
    )


def _is_user_subtype(subtype: object) -> bool:
    return isinstance(subtype, str) and subtype in _USER_SUBTYPES


def _reaction(
    event: Mapping[str, Any], event_id: str | None, team: str, me: BotIdentity
) -> ReactionChanged | None:
    kind = _label(event.get("type"))
    key = f"slack:event:{event_id}" if event_id else None
    user = _text(event, "user")
    item = _mapping(event, "item")
    channel = _text(item, "channel")
    ts = _text(item, "ts")
    emoji = normalize(_text(event, "reaction") or "")
    if item.get("type") != "message":
        return _dropped(kind, key, "a reaction to something other than a message")
    if not (user and channel and ts and emoji and key):
        return _dropped(kind, key, "no user, item, reaction or event_id", malformed=True)
    if user == me.user_id:
        return _dropped(kind, key, "the bot's own reaction")
    return ReactionChanged(
        delivery_key=key,
        ref=PlatformRef(platform=PLATFORM, workspace=team, channel=channel, message=ts, user=user),
        author=_person(user),
        emoji=emoji,
        added=event.get("type") == "reaction_added",
    )


def _is_me(event: Mapping[str, Any], me: BotIdentity) -> bool:
    """Whether ``event`` (or the message inside an edit) comes from the bot itself.

    Slack echoes the bot's own posts as ``message`` events with ``bot_id`` and
    ``user`` set and no subtype, so each identity field is compared
    (https://docs.slack.dev/reference/events/message/bot_message).
    """
    for candidate in (event, _mapping(event, "message")):
        mine = (
            (_text(candidate, "user"), me.user_id),
            (_text(candidate, "bot_id"), me.bot_id),
            (_text(candidate, "app_id"), me.app_id),
            (_text(_mapping(candidate, "bot_profile"), "app_id"), me.app_id),
        )
        if any(value is not None and value == own for value, own in mine):
            return True
    return False


def _person(user: str) -> Author:
    """A person, named by a mention that Slack renders as their name."""
    return Author(id=user, name=f"<@{user}>")


def _bot(event: Mapping[str, Any], person: str | None, user: str) -> Author:
    """Another bot: a bot user renders as a mention; a bare ``bot_id`` by its given name.

    A ``bot_message`` from an integration may carry only ``bot_id`` and ``username``
    (https://docs.slack.dev/reference/events/message/bot_message).
    """
    if person:
        return Author(id=person, name=f"<@{person}>", is_bot=True)
    profile = _text(_mapping(event, "bot_profile"), "name")
    return Author(id=user, name=_text(event, "username") or profile or user, is_bot=True)


def _text(mapping: Mapping[str, Any], key: str) -> str | None:
    """``mapping[key]`` if it is a non-empty string, else None."""
    value = mapping.get(key)
    return value if isinstance(value, str) and value else None


def _mapping(mapping: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``mapping[key]`` if it is a mapping, else an empty one."""
    value = mapping.get(key)
    return value if isinstance(value, Mapping) else {}


def _event_kind(body: Mapping[str, Any]) -> str:
    """An Events API body's payload type for a log line: ``message/message_changed``."""
    event = body.get("event")
    if not isinstance(event, Mapping):
        return f"body {_label(body.get('type'))}"
    subtype = event.get("subtype")
    kind = _label(event.get("type"))
    return kind if subtype is None else f"{kind}/{_label(subtype)}"


def _label(value: object) -> str:
    """``value`` for a log line: a string cut to a few dozen characters, else its type."""
    if isinstance(value, str):
        return value if len(value) <= _LABEL_LIMIT else f"{value[:_LABEL_LIMIT]}..."
    return f"<{type(value).__name__}>"


def _dropped(kind: str, key: str | None, why: str, *, malformed: bool = False) -> Never | None:  # noqa: RUF020
    """Log a payload that gives no event; returns None, for ``return _dropped(...)``.

    ``kind`` is its payload type, ``key`` its delivery key when it has one.
    Malformed payloads are logged at WARNING, the ones left out on purpose at
    DEBUG. (``Never | None`` is None to a reader; mypy accepts ``return`` of it.)
    """
    level = logging.WARNING if malformed else logging.DEBUG
    log.log(level, "dropped Slack %s %s: %s", kind, _label(key) if key else "no key", why)
    return None
