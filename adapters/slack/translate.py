"""Pure translators for inbound Slack payloads: a payload in, a neutral event out.

No I/O and no slack-bolt or slack-sdk objects: each function takes the payload as
Slack delivers it (a parsed JSON body or form, typed by :mod:`adapters.slack.types`
and read through the checks of :mod:`adapters.fields`) and the bot's own
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
from typing import cast

from adapters.drops import DropLog, label
from adapters.fields import integer, mapping, mappings, text
from adapters.slack.mentions import mentions_bot, without_mentions
from adapters.slack.types import (
    AuthTest,
    BlockActions,
    EventCallback,
    File,
    MessageEvent,
    ReactionEvent,
    SlashCommand,
)
from conversations.emoji import normalize
from conversations.events import (
    Attachment,
    Author,
    ButtonPressed,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
)

log = logging.getLogger(__name__)
_dropped = DropLog("Slack", log)

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
    def from_auth_test(cls, answer: AuthTest, *, app_id: str = "") -> BotIdentity:
        """The identity in an ``auth.test`` answer (``user_id``, ``bot_id``, ``team_id``).

        A field missing or not a string gives ``""``.
        """
        return cls(
            user_id=text(answer.get("user_id")) or "",
            bot_id=text(answer.get("bot_id")) or "",
            app_id=app_id,
            team_id=text(answer.get("team_id")) or "",
        )


def inbound_event(
    body: EventCallback, me: BotIdentity, *, allow_bots: bool = False
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
      outside code and quotes; its ``files`` are its attachments
      (:func:`attachments`);
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
        return _dropped(f"body {label(body)}", None, "not an object", malformed=True)
    event = body.get("event")
    kind = _event_kind(body)
    event_id = text(body.get("event_id"))
    event_key = f"slack:event:{event_id}" if event_id else None
    if body.get("type") != "event_callback" or not isinstance(event, Mapping):
        return _dropped(kind, event_key, "not an event callback")
    team = text(body.get("team_id")) or me.team_id
    if not team:
        return _dropped(kind, event_key, "no team_id", malformed=True)
    match event.get("type"):  # the event's type tells its shape
        case "app_mention" | "message":
            return _message(cast(MessageEvent, event), team, me, allow_bots, kind)
        case "reaction_added" | "reaction_removed":
            return _reaction(cast(ReactionEvent, event), event_id, team, me)
        case _:
            return _dropped(kind, event_key, "an event the conversations do not take")


def command_event(form: SlashCommand, me: BotIdentity) -> CommandInvoked | None:
    """Translate a slash command into :class:`CommandInvoked`, or None if fields are missing.

    ``form`` is the form-encoded body parsed into single values, or the ``payload``
    of a Socket Mode ``slash_commands`` envelope (the same fields)
    (https://docs.slack.dev/interactivity/implementing-slash-commands). ``name`` is
    ``command`` without its slash, ``args`` is ``text``, whatever the command: the
    stop command gives ``name="stop"`` (or its configured name) and ``/threadbot
    settings`` gives ``name="threadbot", args="settings"``; the hub answers a name
    it does not know. Slack sends no thread with a slash command, even one typed in
    a thread, so ``ref.thread`` is None and the hub must work out which
    conversation of the channel is meant. None (logged) for a malformed form;
    never raises.

    Only the commands in ``adapters/slack/manifest.yaml`` reach the app: after a
    command is added there, the installed app's manifest must be updated and the
    app reinstalled (Reinstall to Workspace) before Slack shows it
    (https://api.slack.com/interactivity/slash-commands).
    """
    if not isinstance(form, Mapping):
        return _dropped(f"slash command {label(form)}", None, "not an object", malformed=True)
    command = text(form.get("command"))
    channel = text(form.get("channel_id"))
    user = text(form.get("user_id"))
    trigger = text(form.get("trigger_id"))
    team = text(form.get("team_id")) or me.team_id
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


def action_event(payload: BlockActions, me: BotIdentity) -> ButtonPressed | None:
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
        return _dropped(f"interaction {label(payload)}", None, "not an object", malformed=True)
    kind = f"interaction {label(payload.get('type'))}"
    trigger = text(payload.get("trigger_id"))
    if payload.get("type") != "block_actions":
        return _dropped(kind, f"slack:action:{trigger}" if trigger else None, "not a button")
    actions = payload.get("actions")
    first = mapping(actions[0] if isinstance(actions, list) and actions else None)
    user = text(mapping(payload.get("user")).get("id"))
    key = trigger or text(first.get("action_ts"))
    delivery_key = f"slack:action:{key}" if key else None
    if user is not None and user == me.user_id:
        return _dropped(kind, delivery_key, "the bot's own click")
    action = text(first.get("value")) or text(first.get("action_id"))
    container = mapping(payload.get("container"))
    channel = text(mapping(payload.get("channel")).get("id")) or text(container.get("channel_id"))
    message_ts = text(container.get("message_ts"))
    team = (
        text(mapping(payload.get("team")).get("id"))
        or text(mapping(payload.get("user")).get("team_id"))
        or me.team_id
    )
    if not (user and action and channel and message_ts and delivery_key and team):
        return _dropped(kind, delivery_key, "a field is missing", malformed=True)
    thread = text(mapping(payload.get("message")).get("thread_ts")) or text(
        container.get("thread_ts")
    )
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
    event: MessageEvent, team: str, me: BotIdentity, allow_bots: bool, kind: str
) -> MessagePosted | None:
    channel, ts = text(event.get("channel")), text(event.get("ts"))
    key = f"slack:{team}:{channel}:{ts}" if channel and ts else None
    subtype = event.get("subtype")
    is_bot = bool(text(event.get("bot_id"))) or subtype == "bot_message"
    if subtype is not None and not (subtype == "bot_message" or _is_user_subtype(subtype)):
        return _dropped(kind, key, "a subtype that is not a new message")
    if event.get("hidden") or _is_me(event, me) or (is_bot and not allow_bots):
        return _dropped(kind, key, "hidden, the bot's own, or another bot's")
    person = text(event.get("user"))
    user = person or (text(event.get("bot_id")) if is_bot else None)
    content = event.get("text")
    if not (user and key) or not isinstance(content, str):
        return _dropped(kind, key, "no user, channel, ts or text", malformed=True)
    return MessagePosted(
        delivery_key=key,
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=team,
            channel=channel,
            thread=text(event.get("thread_ts")),
            message=ts,
            user=user,
        ),
        author=_bot(event, person, user) if is_bot else _person(user),
        text=unescape(without_mentions(content, me.user_id)).strip(),
        mentions_bot=event.get("channel_type") == "im" or mentions_bot(event, me.user_id),
        attachments=attachments(event.get("files")),
    )


def attachments(files: list[File] | None) -> tuple[Attachment, ...]:
    """The files of a message event as neutral references (https://api.slack.com/types/file).

    ``url`` is ``url_private_download`` (else ``url_private``): the adapter fetches it
    with the bot token (:mod:`adapters.slack.files`), which refuses any host but
    Slack's. A deleted file (``tombstone``), one past a free workspace's history
    (``hidden_by_limit``) and one Slack gives no URL for get ``url=""``. ``name`` is
    the file's ``name``, else its ``title``, else its id; a file without an id is
    left out. Never raises.
    """
    found = []
    for file in mappings(files):
        file_id = text(file.get("id"))
        if file_id is None:
            continue
        url = text(file.get("url_private_download")) or text(file.get("url_private")) or ""
        if file.get("mode") in ("tombstone", "hidden_by_limit"):
            url = ""
        found.append(
            Attachment(
                id=file_id,
                name=text(file.get("name")) or text(file.get("title")) or file_id,
                url=url,
                media_type=text(file.get("mimetype")) or "application/octet-stream",
                size=integer(file.get("size")),
            )
        )
    return tuple(found)


def _is_user_subtype(subtype: object) -> bool:
    return isinstance(subtype, str) and subtype in _USER_SUBTYPES


def _reaction(
    event: ReactionEvent, event_id: str | None, team: str, me: BotIdentity
) -> ReactionChanged | None:
    kind = label(event.get("type"))
    key = f"slack:event:{event_id}" if event_id else None
    user = text(event.get("user"))
    item = mapping(event.get("item"))
    channel = text(item.get("channel"))
    ts = text(item.get("ts"))
    emoji = normalize(text(event.get("reaction")) or "")
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


def _is_me(event: MessageEvent, me: BotIdentity) -> bool:
    """Whether ``event`` (or the message inside an edit) comes from the bot itself.

    Slack echoes the bot's own posts as ``message`` events with ``bot_id`` and
    ``user`` set and no subtype, so each identity field is compared
    (https://docs.slack.dev/reference/events/message/bot_message).
    """
    for candidate in (event, mapping(event.get("message"))):
        mine = (
            (text(candidate.get("user")), me.user_id),
            (text(candidate.get("bot_id")), me.bot_id),
            (text(candidate.get("app_id")), me.app_id),
            (text(mapping(candidate.get("bot_profile")).get("app_id")), me.app_id),
        )
        if any(value is not None and value == own for value, own in mine):
            return True
    return False


def _person(user: str) -> Author:
    """A person, named by a mention that Slack renders as their name."""
    return Author(id=user, name=f"<@{user}>")


def _bot(event: MessageEvent, person: str | None, user: str) -> Author:
    """Another bot: a bot user renders as a mention; a bare ``bot_id`` by its given name.

    A ``bot_message`` from an integration may carry only ``bot_id`` and ``username``
    (https://docs.slack.dev/reference/events/message/bot_message).
    """
    if person:
        return Author(id=person, name=f"<@{person}>", is_bot=True)
    profile = text(mapping(event.get("bot_profile")).get("name"))
    return Author(id=user, name=text(event.get("username")) or profile or user, is_bot=True)


def _event_kind(body: EventCallback) -> str:
    """An Events API body's payload type for a log line: ``message/message_changed``."""
    event = body.get("event")
    if not isinstance(event, Mapping):
        return f"body {label(body.get('type'))}"
    subtype = event.get("subtype")
    kind = label(event.get("type"))
    return kind if subtype is None else f"{kind}/{label(subtype)}"
