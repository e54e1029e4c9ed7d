"""Pure translators for inbound Discord gateway dispatches: a payload in, a neutral event out.

No I/O and no discord.py objects: each function takes the ``d`` of a gateway
dispatch frame ``{"op": 0, "t": NAME, "s": SEQ, "d": {...}}``
(https://discord.com/developers/docs/events/gateway-events#receive-events) as a
parsed JSON mapping, and the bot's own :class:`BotIdentity`, and returns a
:mod:`conversations.events` event, or None when the payload is not for the
conversations (the bot's own echo, another bot, a system message, a malformed
payload). None of them raises on a malformed payload. Outbound rendering is in
:mod:`adapters.discord.outbound`.

Where things are: a Discord thread is a channel of its own, and a message posted
in a thread carries the thread's id as its ``channel_id``. So an event in a
thread has ``ref.channel == ref.thread == <thread id>``; an event in a plain
channel has ``ref.thread`` None. A thread started from a message has the
message's id (https://discord.com/developers/docs/resources/message#message-object-message-flags,
``HAS_THREAD``), so a conversation that opened on a mention ``M`` in a channel
lives in the thread ``M`` (see :func:`opened_in_thread`).

Delivery keys, which the hub records to drop duplicates (a gateway RESUME
replays missed dispatches):

- a message: ``discord:message:{id}``;
- a reaction: ``discord:reaction:{add|remove}:{channel}:{message}:{user}:{emoji}``
  (the emoji's normalized name, or a custom emoji's id), since reaction
  dispatches carry no id of their own;
- an interaction: ``discord:interaction:{id}``.
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

from conversations.emoji import normalize
from conversations.events import (
    Author,
    ButtonPressed,
    CommandInvoked,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
)

PLATFORM = "discord"

THREAD_TYPES = frozenset({10, 11, 12})
"""Channel types of threads: announcement, public and private thread
(https://discord.com/developers/docs/resources/channel#channel-object-channel-types)."""

_MESSAGE_TYPES = frozenset({0, 19})
"""DEFAULT and REPLY: what a person types; every other type is a system message
(https://discord.com/developers/docs/resources/message#message-object-message-types)."""

_EPHEMERAL = 1 << 6
"""Message flag EPHEMERAL (https://discord.com/developers/docs/resources/message#message-object-message-flags)."""

_BUTTON = 2
"""Component type of a button (https://discord.com/developers/docs/components/reference#component-object-component-types)."""
_SUBCOMMAND_TYPES = frozenset({1, 2})
"""Option types SUB_COMMAND and SUB_COMMAND_GROUP
(https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-option-type)."""


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is, to recognise its own events and its mentions.

    ``user_id`` is the bot user's id (``READY.d.user.id``) and ``application_id``
    the application's (``READY.d.application.id``); for a bot they are usually,
    not necessarily, equal
    (https://discord.com/developers/docs/events/gateway-events#ready).
    """

    user_id: str
    application_id: str

    @classmethod
    def from_ready(cls, d: Mapping[str, Any]) -> BotIdentity:
        """The identity in a READY dispatch's ``d``; ``ValueError`` if it names no user.

        ``application_id`` falls back to ``user_id`` when READY carries no
        ``application.id``.
        """
        user_id = _text(_mapping(d, "user"), "id")
        if not user_id:
            raise ValueError("READY carries no user.id")
        return cls(
            user_id=user_id, application_id=_text(_mapping(d, "application"), "id") or user_id
        )


def message_event(
    d: Mapping[str, Any],
    me: BotIdentity,
    *,
    thread_ids: Container[str],
    allow_bots: bool = False,
    bot_roles: Container[str] = (),
) -> MessagePosted | None:
    """Translate a MESSAGE_CREATE ``d`` into :class:`MessagePosted`, or None to ignore it.

    ``d`` is a message object with the MESSAGE_CREATE extra fields ``guild_id``,
    ``member``, ``mentions`` and ``channel_type``
    (https://discord.com/developers/docs/events/gateway-events#message-create,
    https://discord.com/developers/docs/resources/message#message-object).

    - ``ref``: workspace ``guild_id`` (``""`` in a DM), channel ``channel_id``,
      message ``id``, user ``author.id``. ``thread`` is ``channel_id`` when the
      channel is a thread: listed in ``thread_ids`` (the runner keeps the ids of
      THREAD_CREATE, see :func:`thread_id_of`) or ``channel_type`` 10/11/12. A DM
      has no threads: ``thread`` is None.
    - ``mentions_bot``: the bot's user is in ``mentions``, or one of
      ``bot_roles`` (the bot's managed role in the guild, see
      :func:`bot_role_ids`; a client may insert the role when someone picks the
      bot's name) is in ``mention_roles``, or it is a DM (a DM starts a
      conversation). The content is not searched, since it is empty without the
      Message Content intent.
    - ``text``: ``content`` without ``<@BOT>``, ``<@!BOT>`` and ``<@&ROLE>`` of a
      bot role (with one space after each), stripped.
    - ``author``: ``Author(author.id, member.nick or author.global_name or
      author.username)``, ``is_bot`` for another bot.
    - ``unreadable``: :func:`content_missing`.

    None for: the bot's own messages (``author.id == me.user_id``), other bots'
    unless ``allow_bots``, webhook messages (``webhook_id``), Discord's system
    user, ephemeral messages, every message type but DEFAULT (0) and REPLY (19)
    (thread created, pins, joins, command responses ...), and payloads missing
    ``id``, ``channel_id``, ``author.id``, ``type`` or a string ``content``.
    """
    if not isinstance(d, Mapping):
        return None
    author = _mapping(d, "author")
    author_id = _text(author, "id")
    message_id = _text(d, "id")
    channel = _text(d, "channel_id")
    content = d.get("content")
    if not (author_id and message_id and channel) or not isinstance(content, str):
        return None
    if _int(d, "type") not in _MESSAGE_TYPES or (_int(d, "flags") or 0) & _EPHEMERAL:
        return None
    if author_id == me.user_id or d.get("webhook_id") is not None or author.get("system") is True:
        return None
    is_bot = author.get("bot") is True
    if is_bot and not allow_bots:
        return None
    guild = _text(d, "guild_id") or ""
    roles = [r for r in _list(d, "mention_roles") if isinstance(r, str) and r in bot_roles]
    mentioned = any(_text(u, "id") == me.user_id for u in _mappings(d, "mentions"))
    in_thread = bool(guild) and (channel in thread_ids or _int(d, "channel_type") in THREAD_TYPES)
    return MessagePosted(
        delivery_key=f"discord:message:{message_id}",
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=guild,
            channel=channel,
            thread=channel if in_thread else None,
            message=message_id,
            user=author_id,
        ),
        author=Author(
            id=author_id, name=_display_name(author, _mapping(d, "member")), is_bot=is_bot
        ),
        text=_without_mentions(content, me.user_id, roles).strip(),
        mentions_bot=mentioned or bool(roles) or not guild,
        unreadable=content_missing(d, me),
    )


def content_missing(d: Mapping[str, Any], me: BotIdentity) -> bool:
    """Whether Discord withheld the content of the MESSAGE_CREATE ``d``.

    Without the privileged Message Content intent, an app receives empty
    ``content``, ``embeds``, ``attachments`` and ``components`` and no ``poll``
    (https://discord.com/developers/docs/resources/message#message-object, note
    [2]), except in DMs, in messages that mention the app and in the app's own
    messages (https://discord.com/developers/docs/events/gateway#message-content-intent).
    So this is True for a guild message from someone else that does not mention
    the bot and has nothing at all: empty content, no attachments, embeds,
    components, poll, stickers or forwarded snapshots (a sticker-only message is
    empty for everyone). A message in a conversation's thread for which this is
    True cannot be an answer: the hub tells the thread instead.
    """
    if not isinstance(d, Mapping):
        return False
    author_id = _text(_mapping(d, "author"), "id")
    if not _text(d, "guild_id") or author_id is None or author_id == me.user_id:
        return False
    if any(_text(u, "id") == me.user_id for u in _mappings(d, "mentions")):
        return False
    content = d.get("content")
    if isinstance(content, str) and content.strip():
        return False
    fields = ("attachments", "embeds", "components", "sticker_items", "message_snapshots")
    return not any(_list(d, field) for field in fields) and not d.get("poll")


def reaction_event(
    d: Mapping[str, Any],
    me: BotIdentity,
    *,
    added: bool,
    thread_ids: Container[str] = (),
) -> ReactionChanged | None:
    """Translate MESSAGE_REACTION_ADD (``added``) or _REMOVE ``d`` into :class:`ReactionChanged`.

    ``d`` has ``user_id``, ``channel_id``, ``message_id``, ``guild_id``, ``emoji``
    and, for an add in a guild, ``member``
    (https://discord.com/developers/docs/events/gateway-events#message-reaction-add).
    A standard emoji has ``id`` null and the character itself as ``name``, with
    or without U+FE0F and a skin tone; it becomes its shortcode name through
    :func:`conversations.emoji.normalize` (``✅`` -> ``white_check_mark``,
    ``👍🏽`` -> ``+1``). A custom emoji has an ``id``; it is known by its name,
    case kept (https://discord.com/developers/docs/resources/emoji#emoji-object).
    ``ref``: workspace ``guild_id``, channel ``channel_id``, message
    ``message_id``, user ``user_id``; ``thread`` is ``channel_id`` when it is in
    ``thread_ids``. The author is ``member.user`` named by ``member.nick``,
    ``global_name`` or ``username`` when the dispatch has a member (adds in a
    guild), else just the user id (removes and DMs carry no member).

    None for the bot's own reactions (``user_id == me.user_id``, for example the
    ones it seeds on its plan) and payloads missing a field or an emoji name.
    """
    if not isinstance(d, Mapping):
        return None
    user = _text(d, "user_id")
    channel = _text(d, "channel_id")
    message = _text(d, "message_id")
    emoji = _mapping(d, "emoji")
    custom_id = _text(emoji, "id")
    name = normalize(_text(emoji, "name") or "")
    if not (user and channel and message) or user == me.user_id or not name:
        return None
    change = "add" if added else "remove"
    member = _mapping(d, "member")
    person = _mapping(member, "user")
    author = (
        Author(id=user, name=_display_name(person, member), is_bot=person.get("bot") is True)
        if _text(person, "id") == user
        else Author(id=user, name=_text(member, "nick") or user)
    )
    return ReactionChanged(
        delivery_key=f"discord:reaction:{change}:{channel}:{message}:{user}:{custom_id or name}",
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=_text(d, "guild_id") or "",
            channel=channel,
            thread=channel if channel in thread_ids else None,
            message=message,
            user=user,
        ),
        author=author,
        emoji=name,
        added=added,
    )


def interaction_event(
    d: Mapping[str, Any], me: BotIdentity
) -> CommandInvoked | ButtonPressed | None:
    """Translate an INTERACTION_CREATE ``d`` into a command or a button press, or None.

    ``d`` is an interaction object
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object).
    The invoking user is ``member.user`` in a guild and ``user`` in a DM;
    ``ref`` has workspace ``guild_id`` (``""`` in a DM), channel ``channel_id``
    (else ``channel.id``) and ``thread`` = the channel when the partial
    ``channel`` says it is a thread (``type`` 10, 11 or 12).

    - APPLICATION_COMMAND (2): :class:`CommandInvoked` with ``name`` = ``data.name``
      and ``args`` = the subcommand names and option values in order, joined by
      spaces (``/threadbot stop 123`` gives name ``threadbot``, args
      ``stop 123``); a user or message command without options gives its
      ``data.target_id``.
    - MESSAGE_COMPONENT (3) from a button (``data.component_type`` 2):
      :class:`ButtonPressed` with ``action`` = ``data.custom_id`` and
      ``ref.message`` = ``message.id``.

    None for PING, autocomplete, modal submits, select menus, the bot itself
    and payloads missing a field. The runner must still answer or defer every
    interaction within 3 s, whatever this returns
    (https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction).
    """
    if not isinstance(d, Mapping):
        return None
    interaction = _text(d, "id")
    member = _mapping(d, "member")
    person = _mapping(member, "user") or _mapping(d, "user")
    user = _text(person, "id")
    box = _mapping(d, "channel")
    channel = _text(d, "channel_id") or _text(box, "id")
    data = _mapping(d, "data")
    if not (interaction and user and channel) or user == me.user_id:
        return None
    ref = PlatformRef(
        platform=PLATFORM,
        workspace=_text(d, "guild_id") or "",
        channel=channel,
        thread=channel if _int(box, "type") in THREAD_TYPES else None,
        user=user,
    )
    author = Author(id=user, name=_display_name(person, member), is_bot=person.get("bot") is True)
    key = f"discord:interaction:{interaction}"
    match _int(d, "type"):
        case 2:  # APPLICATION_COMMAND
            name = _text(data, "name")
            if not name:
                return None
            args = " ".join(_option_words(_mappings(data, "options")))
            args = args or _text(data, "target_id") or ""
            return CommandInvoked(delivery_key=key, ref=ref, author=author, name=name, args=args)
        case 3:  # MESSAGE_COMPONENT
            action = _text(data, "custom_id")
            message = _text(_mapping(d, "message"), "id")
            if not (action and message) or _int(data, "component_type") != _BUTTON:
                return None
            ref = ref.model_copy(update={"message": message})
            return ButtonPressed(delivery_key=key, ref=ref, author=author, action=action)
        case _:
            return None


def thread_id_of(d: Mapping[str, Any]) -> str | None:
    """The thread's id in a THREAD_CREATE ``d``, or None if it is not a thread.

    THREAD_CREATE comes when a thread is created and when the bot is added to an
    existing thread (``newly_created`` tells them apart); both mean the channel
    is a thread (https://discord.com/developers/docs/events/gateway-events#thread-create).
    """
    if not isinstance(d, Mapping):
        return None
    kind = _int(d, "type")
    return _text(d, "id") if kind is None or kind in THREAD_TYPES else None


def bot_role_ids(guild: Mapping[str, Any], me: BotIdentity) -> frozenset[str]:
    """The ids of the bot's managed roles in a GUILD_CREATE ``d`` (or a guild object).

    Discord gives a bot a role named after it, tagged ``tags.bot_id``
    (https://discord.com/developers/docs/topics/permissions#role-object-role-tags-structure);
    pass them to :func:`message_event` as ``bot_roles``.
    """
    return frozenset(
        role_id
        for role in _mappings(guild, "roles")
        if _text(_mapping(role, "tags"), "bot_id") == me.user_id
        and (role_id := _text(role, "id")) is not None
    )


def opened_in_thread(event: MessagePosted, thread_id: str) -> MessagePosted:
    """The mention ``event`` seen from the thread the runner started on it.

    A mention in a channel has ``ref.channel`` = that channel and no thread. Once
    the runner has started a thread on the message (the thread's id is the
    message's id), every later message, reaction and button of the conversation
    comes with ``channel_id`` = the thread. Handing the hub the mention with
    ``ref.channel = thread_id`` (``thread`` still None, ``message`` unchanged)
    binds the conversation to ``(thread_id, thread_id)``, where those events
    find it. Any other event comes back unchanged.
    """
    if event.ref.thread is not None or not event.ref.workspace:
        return event
    return event.model_copy(update={"ref": event.ref.model_copy(update={"channel": thread_id})})


# --- helpers ---------------------------------------------------------------------


def _option_words(options: list[Mapping[str, Any]]) -> list[str]:
    """Subcommand names and option values, depth first, as text."""
    words: list[str] = []
    for option in options:
        if _int(option, "type") in _SUBCOMMAND_TYPES:
            words.append(_text(option, "name") or "")
            words.extend(_option_words(_mappings(option, "options")))
            continue
        value = option.get("value")
        if isinstance(value, bool):
            words.append("true" if value else "false")
        elif isinstance(value, str | int | float):
            words.append(str(value))
    return [word for word in words if word]


def _without_mentions(content: str, user_id: str, roles: list[str]) -> str:
    """``content`` without the bot's user mentions and the given role mentions."""
    targets = [rf"@!?{re.escape(user_id)}"] + [rf"@&{re.escape(role)}" for role in roles]
    return re.sub(rf"<(?:{'|'.join(targets)})>[ \t]?", "", content)


def _display_name(user: Mapping[str, Any], member: Mapping[str, Any]) -> str:
    """A member's nickname, else the user's global display name, username or id."""
    return (
        _text(member, "nick")
        or _text(user, "global_name")
        or _text(user, "username")
        or _text(user, "id")
        or "?"
    )


def _text(mapping: Mapping[str, Any], key: str) -> str | None:
    """``mapping[key]`` if it is a non-empty string, else None."""
    value = mapping.get(key)
    return value if isinstance(value, str) and value else None


def _int(mapping: Mapping[str, Any], key: str) -> int | None:
    """``mapping[key]`` if it is an integer (not a bool), else None."""
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mapping(mapping: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``mapping[key]`` if it is a mapping, else an empty one."""
    value = mapping.get(key)
    return value if isinstance(value, Mapping) else {}


def _list(mapping: Mapping[str, Any], key: str) -> list[Any]:
    """``mapping[key]`` if it is a list, else an empty one."""
    value = mapping.get(key)
    return value if isinstance(value, list) else []


def _mappings(mapping: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The mappings in the list ``mapping[key]``."""
    return [item for item in _list(mapping, key) if isinstance(item, Mapping)]
