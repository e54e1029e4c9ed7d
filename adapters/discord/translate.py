"""Pure translators for inbound Discord gateway dispatches: a payload in, a neutral event out.

No I/O and no discord.py objects: each function takes the ``d`` of a gateway
dispatch frame ``{"op": 0, "t": NAME, "s": SEQ, "d": {...}}``
(https://discord.com/developers/docs/events/gateway-events#receive-events) as a
parsed JSON mapping (typed by :mod:`adapters.discord.types`, read through the
checks of :mod:`adapters.fields` and :mod:`adapters.discord.payload`), and the
bot's own :class:`BotIdentity`, and returns a
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

from collections.abc import Container, Mapping

from adapters.discord.identity import BotIdentity
from adapters.discord.interactions import PLATFORM, THREAD_TYPES, interaction_event
from adapters.discord.mentions import mentioned_roles, mentions_bot, without_mentions
from adapters.discord.payload import bad_snowflake, dropped, mention, snowflake
from adapters.discord.types import (
    Attachment,
    Channel,
    GuildCreateEvent,
    MessageCreateEvent,
    ReactionEvent,
)
from adapters.drops import label
from adapters.fields import integer, items, mapping, mappings, text
from conversations.emoji import normalize
from conversations.events import Attachment as SharedRef
from conversations.events import Author, MessagePosted, PlatformRef, ReactionChanged

__all__ = [
    "PLATFORM",
    "THREAD_TYPES",
    "BotIdentity",
    "attachments",
    "bot_role_ids",
    "content_missing",
    "interaction_event",
    "message_event",
    "opened_in_thread",
    "reaction_event",
    "thread_id_of",
]

_MESSAGE_TYPES = frozenset({0, 19})
"""DEFAULT and REPLY: what a person types; every other type is a system message
(https://discord.com/developers/docs/resources/message#message-object-message-types)."""

_EPHEMERAL = 1 << 6
"""Message flag EPHEMERAL (https://discord.com/developers/docs/resources/message#message-object-message-flags)."""

_MESSAGE = "MESSAGE_CREATE"
_NO_PARENTS: Mapping[str, str] = {}


def message_event(
    d: MessageCreateEvent,
    me: BotIdentity,
    *,
    thread_ids: Container[str],
    parents: Mapping[str, str] = _NO_PARENTS,
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
      has no threads: ``thread`` is None. ``parent``: the thread's channel, from
      ``parents`` (thread id to the ``parent_id`` the runner saw), when known.
    - ``mentions_bot``: the bot is mentioned by Discord's own account of the
      message: its user in ``mentions``, or one of ``bot_roles`` (the bot's
      managed role in the guild, see :func:`bot_role_ids`; a client may insert
      the role when someone picks the bot's name) in ``mention_roles``, unless
      the content names it only inside code or quotes
      (:func:`adapters.discord.mentions.mentions_bot`); or it is a DM (a DM
      starts a conversation).
    - ``text``: ``content`` without ``<@BOT>``, ``<@!BOT>`` and ``<@&ROLE>`` of a
      bot role (with one space after each) outside code and quotes, stripped.
    - ``author``: ``Author(author.id, "<@author.id>")`` (:func:`mention`: texts
      address people by mention, never by a name they chose), ``is_bot`` for
      another bot.
    - ``unreadable``: :func:`content_missing`.
    - ``attachments``: its files (:func:`attachments`).

    None for: the bot's own messages (``author.id == me.user_id``), other bots'
    unless ``allow_bots``, webhook messages (``webhook_id``), Discord's system
    user, ephemeral messages, every message type but DEFAULT (0) and REPLY (19)
    (thread created, pins, joins, command responses ...), and payloads missing
    ``id``, ``channel_id``, ``author.id``, ``type`` or a string ``content``.
    Each is logged (:data:`adapters.discord.payload.dropped`); never raises.
    """
    if not isinstance(d, Mapping):
        return dropped(_MESSAGE, None, f"the payload is {label(d)}", malformed=True)
    message_id = snowflake(d.get("id"))
    key = f"discord:message:{message_id}" if message_id else None
    skip = _skipped_message(d, me, allow_bots)
    if skip is not None:
        return dropped(_MESSAGE, key, skip[0], malformed=skip[1])
    author = mapping(d.get("author"))
    author_id, channel = snowflake(author.get("id")), snowflake(d.get("channel_id"))
    content = d.get("content")
    assert key and author_id and channel and isinstance(content, str)  # _skipped_message
    guild = snowflake(d.get("guild_id")) or ""
    roles = mentioned_roles(d, bot_roles)
    threaded = channel in thread_ids or integer(d.get("channel_type")) in THREAD_TYPES
    in_thread = bool(guild) and threaded
    return MessagePosted(
        delivery_key=key,
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=guild,
            channel=channel,
            thread=channel if in_thread else None,
            parent=parents.get(channel) if in_thread else None,
            message=message_id,
            user=author_id,
        ),
        author=Author(id=author_id, name=mention(author_id), is_bot=author.get("bot") is True),
        text=without_mentions(content, me.user_id, roles).strip(),
        mentions_bot=not guild or mentions_bot(d, me.user_id, bot_roles),
        unreadable=content_missing(d, me),
        attachments=attachments(d.get("attachments")),
    )


def attachments(found: list[Attachment] | None) -> tuple[SharedRef, ...]:
    """A message's ``attachments`` as neutral references
    (https://discord.com/developers/docs/resources/message#attachment-object).

    ``url`` is the attachment's ``url`` (fetched without any token, from Discord's CDN
    only: :mod:`adapters.discord.files`); ``name`` its ``filename``; ``media_type``
    its ``content_type``, ``application/octet-stream`` when Discord gives none. An
    attachment without an id or a url is left out. Never raises.
    """
    return tuple(
        SharedRef(
            id=attachment_id,
            name=text(a.get("filename")) or attachment_id,
            url=url,
            media_type=text(a.get("content_type")) or "application/octet-stream",
            size=integer(a.get("size")),
        )
        for a in mappings(found)
        if (attachment_id := snowflake(a.get("id"))) and (url := text(a.get("url")))
    )


def _skipped_message(
    d: MessageCreateEvent, me: BotIdentity, allow_bots: bool
) -> tuple[str, bool] | None:
    """Why MESSAGE_CREATE ``d`` gives no event and whether it is malformed, or None."""
    author = mapping(d.get("author"))
    author_id = snowflake(author.get("id"))
    if not (author_id and snowflake(d.get("id")) and snowflake(d.get("channel_id"))):
        return "no id, channel_id or author.id (snowflakes)", True
    if bad_snowflake(d.get("guild_id")):
        return "guild_id is not a snowflake", True
    if not isinstance(d.get("content"), str):
        return "content is not a string", True
    kind = integer(d.get("type"))
    if kind not in _MESSAGE_TYPES:
        return f"message type {label(d.get('type'))} is not a person's message", kind is None
    if (integer(d.get("flags")) or 0) & _EPHEMERAL:
        return "an ephemeral message", False
    if author_id == me.user_id:
        return "the bot's own message", False
    if d.get("webhook_id") is not None or author.get("system") is True:
        return "a webhook or system message", False
    if author.get("bot") is True and not allow_bots:
        return "another bot's message", False
    return None


def content_missing(d: MessageCreateEvent, me: BotIdentity) -> bool:
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
    author_id = text(mapping(d.get("author")).get("id"))
    if not text(d.get("guild_id")) or author_id is None or author_id == me.user_id:
        return False
    if any(text(u.get("id")) == me.user_id for u in mappings(d.get("mentions"))):
        return False
    content = d.get("content")
    if isinstance(content, str) and content.strip():
        return False
    lists = (
        d.get("attachments"),
        d.get("embeds"),
        d.get("components"),
        d.get("sticker_items"),
        d.get("message_snapshots"),
    )
    return not any(items(value) for value in lists) and not d.get("poll")


def reaction_event(
    d: ReactionEvent,
    me: BotIdentity,
    *,
    added: bool,
    thread_ids: Container[str] = (),
    parents: Mapping[str, str] = _NO_PARENTS,
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
    ``thread_ids``, ``parent`` its channel from ``parents`` when known. The author
    is ``user_id``, named by :func:`mention`; ``is_bot`` when the dispatch's
    ``member.user`` (adds in a guild; removes and DMs carry no member) is that
    user and a bot.

    None, logged (:data:`adapters.discord.payload.dropped`), for the bot's own
    reactions (``user_id == me.user_id``, for example the ones it seeds on its
    plan) and payloads missing a field or an emoji name; never raises.
    """
    kind = "MESSAGE_REACTION_ADD" if added else "MESSAGE_REACTION_REMOVE"
    if not isinstance(d, Mapping):
        return dropped(kind, None, f"the payload is {label(d)}", malformed=True)
    user = snowflake(d.get("user_id"))
    channel = snowflake(d.get("channel_id"))
    message = snowflake(d.get("message_id"))
    emoji = mapping(d.get("emoji"))
    custom_id = snowflake(emoji.get("id"))
    name = normalize(text(emoji.get("name")) or "")
    change = "add" if added else "remove"
    key = f"discord:reaction:{change}:{channel}:{message}:{user}:{custom_id or name}"
    if not (user and channel and message and name) or bad_snowflake(d.get("guild_id")):
        return dropped(kind, None, "no user_id, channel_id, message_id or emoji", malformed=True)
    if user == me.user_id:
        return dropped(kind, key, "the bot's own reaction")
    person = mapping(mapping(d.get("member")).get("user"))
    is_bot = text(person.get("id")) == user and person.get("bot") is True
    author = Author(id=user, name=mention(user), is_bot=is_bot)
    return ReactionChanged(
        delivery_key=key,
        ref=PlatformRef(
            platform=PLATFORM,
            workspace=snowflake(d.get("guild_id")) or "",
            channel=channel,
            thread=channel if channel in thread_ids else None,
            parent=parents.get(channel) if channel in thread_ids else None,
            message=message,
            user=user,
        ),
        author=author,
        emoji=name,
        added=added,
    )


def thread_parent_of(d: Channel) -> str | None:
    """The ``parent_id`` of a thread channel object: the channel the thread is in."""
    return snowflake(d.get("parent_id")) if isinstance(d, Mapping) else None


def thread_id_of(d: Channel) -> str | None:
    """The thread's id in a THREAD_CREATE ``d`` (or a GUILD_CREATE thread), None if not a thread.

    THREAD_CREATE comes when a thread is created and when the bot is added to an
    existing thread (``newly_created`` tells them apart); both mean the channel
    is a thread (https://discord.com/developers/docs/events/gateway-events#thread-create).
    """
    if not isinstance(d, Mapping):
        return None
    kind = integer(d.get("type"))
    return snowflake(d.get("id")) if kind is None or kind in THREAD_TYPES else None


def bot_role_ids(guild: GuildCreateEvent, me: BotIdentity) -> frozenset[str]:
    """The ids of the bot's managed roles in a GUILD_CREATE ``d`` (or a guild object).

    Discord gives a bot a role named after it, tagged ``tags.bot_id``
    (https://discord.com/developers/docs/topics/permissions#role-object-role-tags-structure);
    pass them to :func:`message_event` as ``bot_roles``. Empty for a malformed guild.
    """
    if not isinstance(guild, Mapping):
        return frozenset()
    return frozenset(
        role_id
        for role in mappings(guild.get("roles"))
        if text(mapping(role.get("tags")).get("bot_id")) == me.user_id
        and (role_id := snowflake(role.get("id"))) is not None
    )


def opened_in_thread(event: MessagePosted, thread_id: str) -> MessagePosted:
    """The mention ``event`` seen from the thread the runner started on it.

    A mention in a channel has ``ref.channel`` = that channel and no thread. Once
    the runner has started a thread on the message (the thread's id is the
    message's id), every later message, reaction and button of the conversation
    comes with ``channel_id`` = the thread. Handing the hub the mention with
    ``ref.channel = thread_id`` (``thread`` still None, ``message`` unchanged)
    binds the conversation to ``(thread_id, thread_id)``, where those events
    find it; ``parent`` keeps the channel of the mention (its settings apply in
    the thread). Any other event comes back unchanged.
    """
    if event.ref.thread is not None or not event.ref.workspace:
        return event
    ref = event.ref.model_copy(update={"channel": thread_id, "parent": event.ref.channel})
    return event.model_copy(update={"ref": ref})
