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

Slack escapes ``&``, ``<`` and ``>`` in message text as HTML entities
(https://docs.slack.dev/messaging/formatting-message-text#escaping); inbound text
is unescaped, so the conversation sees what the person typed. Mentions and links
stay in Slack's ``<@U123>`` / ``<https://...|label>`` syntax.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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

PLATFORM = "slack"

_USER_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
"""Message subtypes a person posts (https://docs.slack.dev/reference/events/message)."""


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
      (https://docs.slack.dev/reference/events/message): a :class:`MessagePosted`
      that mentions the bot when its text holds ``<@me.user_id>`` or it is a DM
      (``channel_type`` ``im``). The bot's mention is removed from the text;
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
    if body.get("type") != "event_callback":
        return None
    event = body.get("event")
    if not isinstance(event, Mapping):
        return None
    team = _text(body, "team_id") or me.team_id
    if not team:
        return None
    match event.get("type"):
        case "app_mention" | "message":
            return _message(event, team, me, allow_bots)
        case "reaction_added" | "reaction_removed":
            return _reaction(event, _text(body, "event_id"), team, me)
        case _:
            return None


def command_event(form: Mapping[str, Any], me: BotIdentity) -> CommandInvoked | None:
    """Translate a slash command into :class:`CommandInvoked`, or None if fields are missing.

    ``form`` is the form-encoded body parsed into single values, or the ``payload``
    of a Socket Mode ``slash_commands`` envelope (the same fields)
    (https://docs.slack.dev/interactivity/implementing-slash-commands). ``name`` is
    ``command`` without its slash, ``args`` is ``text``. Slack sends no thread with
    a slash command, even one typed in a thread, so ``ref.thread`` is None and the
    hub must work out which conversation of the channel is meant.
    """
    command = _text(form, "command")
    channel = _text(form, "channel_id")
    user = _text(form, "user_id")
    trigger = _text(form, "trigger_id")
    team = _text(form, "team_id") or me.team_id
    if not (command and channel and user and trigger and team):
        return None
    name = command.removeprefix("/")
    if not name:
        return None
    args = form.get("text")
    return CommandInvoked(
        delivery_key=f"slack:command:{trigger}",
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
    None for other payload types, the bot's own clicks and missing fields.
    """
    if payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions")
    first = actions[0] if isinstance(actions, list) and actions else None
    user = _text(_mapping(payload, "user"), "id")
    if not isinstance(first, Mapping) or not user or user == me.user_id:
        return None
    action = _text(first, "value") or _text(first, "action_id")
    container = _mapping(payload, "container")
    channel = _text(_mapping(payload, "channel"), "id") or _text(container, "channel_id")
    message_ts = _text(container, "message_ts")
    key = _text(payload, "trigger_id") or _text(first, "action_ts")
    team = (
        _text(_mapping(payload, "team"), "id")
        or _text(_mapping(payload, "user"), "team_id")
        or me.team_id
    )
    if not (action and channel and message_ts and key and team):
        return None
    thread = _text(_mapping(payload, "message"), "thread_ts") or _text(container, "thread_ts")
    return ButtonPressed(
        delivery_key=f"slack:action:{key}",
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
    event: Mapping[str, Any], team: str, me: BotIdentity, allow_bots: bool
) -> MessagePosted | None:
    subtype = event.get("subtype")
    is_bot = bool(_text(event, "bot_id")) or subtype == "bot_message"
    if subtype is not None and subtype not in _USER_SUBTYPES and subtype != "bot_message":
        return None
    if event.get("hidden") or _is_me(event, me) or (is_bot and not allow_bots):
        return None
    person = _text(event, "user")
    user = person or (_text(event, "bot_id") if is_bot else None)
    channel = _text(event, "channel")
    ts = _text(event, "ts")
    text = event.get("text")
    if not (user and channel and ts) or not isinstance(text, str):
        return None
    mention = re.compile(rf"<@{re.escape(me.user_id)}(?:\|[^>]*)?>[ \t]?") if me.user_id else None
    mentions_bot = (
        event.get("type") == "app_mention"
        or event.get("channel_type") == "im"
        or (mention is not None and mention.search(text) is not None)
    )
    if mention is not None:
        text = mention.sub("", text)
    return MessagePosted(
        delivery_key=f"slack:{team}:{channel}:{ts}",
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=team,
            channel=channel,
            thread=_text(event, "thread_ts"),
            message=ts,
            user=user,
        ),
        author=_bot(event, person, user) if is_bot else _person(user),
        text=unescape(text).strip(),
        mentions_bot=mentions_bot,
    )


def _reaction(
    event: Mapping[str, Any], event_id: str | None, team: str, me: BotIdentity
) -> ReactionChanged | None:
    user = _text(event, "user")
    item = _mapping(event, "item")
    channel = _text(item, "channel")
    ts = _text(item, "ts")
    emoji = normalize(_text(event, "reaction") or "")
    if item.get("type") != "message" or not (user and channel and ts and emoji and event_id):
        return None
    if user == me.user_id:
        return None
    return ReactionChanged(
        delivery_key=f"slack:event:{event_id}",
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
