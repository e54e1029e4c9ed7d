"""The raw Discord payloads the adapter reads, typed as ``TypedDict`` classes.

As discord.py types its own (``discord/types/``): each class is the JSON object
Discord documents, with the fields the adapter reads or that identify the object,
and a link to its page. A field the documentation marks optional (``field?``) is
``NotRequired``; a nullable one (``?type``) includes None. Fields the adapter never
reads are left out; a payload holding them is still that type.

These types describe what Discord *should* send. What arrives is JSON from the
network, so the translators read every field through the checks of
:mod:`adapters.fields` and :mod:`adapters.discord.payload`, with ``.get``, and
never trust a field's type; the types say where a field is and what it means.

Gateway dispatches (``{"op": 0, "t": NAME, "s": SEQ, "d": DATA}``) and the type of
their ``d``:

- ``READY``: :class:`ReadyEvent`;
- ``GUILD_CREATE``: :class:`GuildCreateEvent`;
- ``THREAD_CREATE``: :class:`ThreadCreateEvent`;
- ``MESSAGE_CREATE``: :class:`MessageCreateEvent`;
- ``MESSAGE_REACTION_ADD`` and ``MESSAGE_REACTION_REMOVE``: :class:`ReactionEvent`;
- ``INTERACTION_CREATE``: :class:`Interaction`.

REST answers the runner reads: Start Thread from Message gives a :class:`Channel`,
Create Message a :class:`Message`, Get Guild Member a :class:`Member`.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

Snowflake = str
"""An id: a 64-bit unsigned integer sent as a string of digits
(https://discord.com/developers/docs/reference#snowflakes)."""


class GatewayDispatch(TypedDict):
    """A gateway frame with op 0, an event
    (https://discord.com/developers/docs/events/gateway-events#payload-structure).

    ``t`` is the event name and ``s`` its sequence number (null for other
    opcodes); ``d`` the event's data, typed by the table in the module docstring.
    """

    op: int
    t: str | None
    s: int | None
    d: Any


class User(TypedDict):
    """A user (https://discord.com/developers/docs/resources/user#user-object).

    ``global_name`` is the display name (null when unset); ``bot`` and ``system``
    are left out for people.
    """

    id: Snowflake
    username: str
    global_name: str | None
    bot: NotRequired[bool]
    system: NotRequired[bool]


class Member(TypedDict):
    """A guild member (https://discord.com/developers/docs/resources/guild#guild-member-object).

    ``user`` is left out where the member rides along with its user
    (``MESSAGE_CREATE``'s ``member``); ``nick`` is the guild nickname; ``roles``
    the ids of its roles, never ``@everyone``'s.
    """

    user: NotRequired[User]
    nick: NotRequired[str | None]
    roles: list[Snowflake]


class PartialApplication(TypedDict):
    """READY's ``application``: its ``id`` and ``flags``
    (https://discord.com/developers/docs/resources/application#application-object-application-flags)."""

    id: Snowflake
    flags: int


class UnavailableGuild(TypedDict):
    """A guild in READY, before its GUILD_CREATE
    (https://discord.com/developers/docs/resources/guild#unavailable-guild-object)."""

    id: Snowflake
    unavailable: bool


class ReadyEvent(TypedDict):
    """READY's ``d``: who the bot is (https://discord.com/developers/docs/events/gateway-events#ready)."""

    v: int
    user: User
    guilds: list[UnavailableGuild]
    session_id: str
    resume_gateway_url: str
    application: PartialApplication


class RoleTags(TypedDict, total=False):
    """A role's ``tags``; ``bot_id`` marks the role Discord gives a bot (its managed role)
    (https://discord.com/developers/docs/topics/permissions#role-object-role-tags-structure)."""

    bot_id: Snowflake


class Role(TypedDict):
    """A role (https://discord.com/developers/docs/topics/permissions#role-object)."""

    id: Snowflake
    name: str
    tags: NotRequired[RoleTags]


class Channel(TypedDict):
    """A channel, a thread among them (https://discord.com/developers/docs/resources/channel#channel-object).

    ``type``: 0 GUILD_TEXT, 1 DM, 5 GUILD_ANNOUNCEMENT, 10/11/12 threads
    (https://discord.com/developers/docs/resources/channel#channel-object-channel-types).
    A thread's ``parent_id`` is the channel it is in.
    """

    id: Snowflake
    type: int
    guild_id: NotRequired[Snowflake]
    parent_id: NotRequired[Snowflake | None]
    name: NotRequired[str | None]


class ThreadCreateEvent(Channel):
    """THREAD_CREATE's ``d``: a thread channel; ``newly_created`` when it was just made,
    left out when the bot was added to an existing thread
    (https://discord.com/developers/docs/events/gateway-events#thread-create)."""

    newly_created: NotRequired[bool]


class GuildCreateEvent(TypedDict):
    """GUILD_CREATE's ``d``: a guild object with the extra fields of the event
    (https://discord.com/developers/docs/events/gateway-events#guild-create);
    ``threads`` are the active threads the bot can see."""

    id: Snowflake
    roles: list[Role]
    threads: list[Channel]
    unavailable: NotRequired[bool]


class Emoji(TypedDict):
    """A reaction's emoji (https://discord.com/developers/docs/resources/emoji#emoji-object).

    A standard emoji has ``id`` null and the character as ``name``; a custom one
    its ``id`` and its name (null for a deleted one).
    """

    id: Snowflake | None
    name: str | None


class MessageMention(User):
    """A user in ``mentions``: a user object, with a partial ``member`` in a guild."""

    member: NotRequired[Member]


class Attachment(TypedDict):
    """A file attached to a message
    (https://discord.com/developers/docs/resources/message#attachment-object).

    ``url`` (on ``cdn.discordapp.com``) and ``proxy_url`` (on ``media.discordapp.net``)
    are signed and need no token; ``size`` is in bytes; ``content_type`` is the
    file's media type, left out when Discord does not know it.
    """

    id: Snowflake
    filename: str
    size: int
    url: str
    proxy_url: str
    content_type: NotRequired[str]
    title: NotRequired[str]
    description: NotRequired[str]
    width: NotRequired[int | None]
    height: NotRequired[int | None]


class Message(TypedDict):
    """A message (https://discord.com/developers/docs/resources/message#message-object).

    ``type``: 0 DEFAULT and 19 REPLY are a person's messages; every other type is a
    system message
    (https://discord.com/developers/docs/resources/message#message-object-message-types).
    ``flags`` bit 6 (64) is EPHEMERAL. Without the Message Content intent,
    ``content``, ``embeds``, ``attachments`` and ``components`` come empty and ``poll``
    is left out, except in DMs and messages that mention the app. ``nonce`` is echoed
    for a message sent with one.
    """

    id: Snowflake
    channel_id: Snowflake
    author: User
    content: str
    type: int
    flags: NotRequired[int]
    webhook_id: NotRequired[Snowflake]
    nonce: NotRequired[int | str]
    mentions: list[MessageMention]
    mention_roles: list[Snowflake]
    attachments: list[Attachment]
    embeds: list[Any]
    components: NotRequired[list[Any]]
    sticker_items: NotRequired[list[Any]]
    poll: NotRequired[Any]
    message_snapshots: NotRequired[list[Any]]
    thread: NotRequired[Channel]


class MessageCreateEvent(Message):
    """MESSAGE_CREATE's ``d``: a message with the event's extra fields
    (https://discord.com/developers/docs/events/gateway-events#message-create-message-create-extra-fields).

    ``guild_id`` and ``member`` (the author as a member, without ``user``) are left
    out in a DM; ``channel_type`` is the type of the channel the message is in.
    """

    guild_id: NotRequired[Snowflake]
    member: NotRequired[Member]
    channel_type: NotRequired[int]


class ReactionEvent(TypedDict):
    """MESSAGE_REACTION_ADD's and MESSAGE_REACTION_REMOVE's ``d``
    (https://discord.com/developers/docs/events/gateway-events#message-reaction-add,
    https://discord.com/developers/docs/events/gateway-events#message-reaction-remove).

    ``member`` (the reacting member, with ``user``) comes only with an add in a
    guild; a reaction carries no id of its own.
    """

    user_id: Snowflake
    channel_id: Snowflake
    message_id: Snowflake
    guild_id: NotRequired[Snowflake]
    member: NotRequired[Member]
    emoji: Emoji


class CommandOption(TypedDict):
    """An option of an application command interaction
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-application-command-interaction-data-option-structure).

    ``type`` 1 SUB_COMMAND and 2 SUB_COMMAND_GROUP carry nested ``options``; the
    others a ``value``
    (https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-option-type).
    """

    name: str
    type: int
    value: NotRequired[str | int | float | bool]
    options: NotRequired[list[CommandOption]]


class InteractionData(TypedDict, total=False):
    """An interaction's ``data``: one of two documented structures, by interaction type.

    APPLICATION_COMMAND (2) sends ``id``, ``name``, ``type``, ``options`` and, for a
    user or message command, ``target_id``
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-application-command-data-structure);
    MESSAGE_COMPONENT (3) sends ``custom_id`` and ``component_type`` (2: a button)
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-message-component-data-structure);
    MODAL_SUBMIT (5) sends the modal's ``custom_id`` and its ``components`` with the
    values typed in
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-modal-submit-data-structure).
    """

    id: Snowflake
    name: str
    type: int
    options: list[CommandOption]
    target_id: Snowflake
    custom_id: str
    component_type: int
    components: list[dict[str, Any]]


class PartialChannel(TypedDict):
    """An interaction's ``channel``: at least its ``id`` and ``type``."""

    id: Snowflake
    type: int


class Interaction(TypedDict):
    """INTERACTION_CREATE's ``d``: an interaction
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object).

    ``type``: 1 PING, 2 APPLICATION_COMMAND, 3 MESSAGE_COMPONENT, 4 autocomplete,
    5 MODAL_SUBMIT. The invoking user is ``member.user`` in a guild and ``user`` in a
    DM; ``message`` is the message a component is on. ``token`` answers it (valid
    for 15 minutes; the first answer is due within 3 s).
    """

    id: Snowflake
    application_id: Snowflake
    type: int
    data: NotRequired[InteractionData]
    guild_id: NotRequired[Snowflake]
    channel: NotRequired[PartialChannel]
    channel_id: NotRequired[Snowflake]
    member: NotRequired[Member]
    user: NotRequired[User]
    token: str
    message: NotRequired[Message]
