"""Translating Discord interactions (slash commands, buttons, a form's submit) into
neutral events.

Pure, like :mod:`adapters.discord.translate` (which re-exports
:func:`interaction_event`): an INTERACTION_CREATE ``d`` in, a
:class:`CommandInvoked`, :class:`ButtonPressed` or :class:`MessagePosted` out, or
None, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.discord.identity import BotIdentity
from adapters.discord.modals import submitted_text
from adapters.discord.payload import bad_snowflake, dropped, mention, snowflake
from adapters.discord.types import CommandOption, Interaction
from adapters.drops import label
from adapters.fields import integer, mapping, mappings, text
from conversations.events import (
    Author,
    ButtonPressed,
    CommandInvoked,
    MessagePosted,
    PlatformRef,
)

PLATFORM = "discord"
"""``PlatformRef.platform`` of every Discord event."""

THREAD_TYPES = frozenset({10, 11, 12})
"""Channel types of threads: announcement, public and private thread
(https://discord.com/developers/docs/resources/channel#channel-object-channel-types)."""

_BUTTON = 2
"""Component type of a button (https://discord.com/developers/docs/components/reference#component-object-component-types)."""
_SUBCOMMAND_TYPES = frozenset({1, 2})
"""Option types SUB_COMMAND and SUB_COMMAND_GROUP
(https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-option-type)."""

_KIND = "INTERACTION_CREATE"


def interaction_event(
    d: Interaction, me: BotIdentity
) -> CommandInvoked | ButtonPressed | MessagePosted | None:
    """Translate an INTERACTION_CREATE ``d`` into a command or a button press, or None.

    ``d`` is an interaction object
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object).
    The invoking user is ``member.user`` in a guild and ``user`` in a DM;
    ``ref`` has workspace ``guild_id`` (``""`` in a DM), channel ``channel_id``
    (else ``channel.id``) and ``thread`` = the channel when the partial
    ``channel`` says it is a thread (``type`` 10, 11 or 12), ``parent`` its
    ``parent_id``.

    - APPLICATION_COMMAND (2): :class:`CommandInvoked` with ``name`` = ``data.name``
      and ``args`` = the subcommand names and option values in order, joined by
      spaces (``/threadbot stop 123`` gives name ``threadbot``, args
      ``stop 123``); a user or message command without options gives its
      ``data.target_id``. A subcommand arrives as an option of type SUB_COMMAND
      (1) under ``data.options``, with its own options nested in it
      (https://discord.com/developers/docs/interactions/application-commands#subcommands-and-subcommand-groups):
      ``/threadbot settings`` (``data.name`` ``threadbot``, ``data.options``
      ``[{"name": "settings", "type": 1}]``, registered by
      :func:`adapters.discord.runner.commands`) gives
      ``CommandInvoked(name="threadbot", args="settings")``.
    - MESSAGE_COMPONENT (3) from a button (``data.component_type`` 2):
      :class:`ButtonPressed` with ``action`` = ``data.custom_id`` and
      ``ref.message`` = ``message.id``.

    - MODAL_SUBMIT (5) of a question's form (:mod:`adapters.discord.modals`):
      :class:`MessagePosted` in the interaction's channel (the thread), its text what
      was typed, as if the person had replied there: the hub takes it as an answer.

    None for PING, autocomplete, other modal submits, select menus, the bot itself
    and payloads missing a field (each logged by
    :data:`adapters.discord.payload.dropped`). The runner must still answer or
    defer every interaction within 3 s, whatever this returns
    (https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction).
    """
    if not isinstance(d, Mapping):
        return dropped(_KIND, None, f"the payload is {label(d)}", malformed=True)
    interaction = snowflake(d.get("id"))
    key = f"discord:interaction:{interaction}" if interaction else None
    member = mapping(d.get("member"))
    person = mapping(member.get("user")) or mapping(d.get("user"))
    user = snowflake(person.get("id"))
    box = mapping(d.get("channel"))
    channel = snowflake(d.get("channel_id")) or snowflake(box.get("id"))
    if not (interaction and user and channel) or bad_snowflake(d.get("guild_id")):
        return dropped(_KIND, key, "no id, user or channel (snowflakes)", malformed=True)
    if user == me.user_id:
        return dropped(_KIND, key, "the bot's own interaction")
    assert key is not None
    in_thread = integer(box.get("type")) in THREAD_TYPES
    ref = PlatformRef(
        platform=PLATFORM,
        workspace=snowflake(d.get("guild_id")) or "",
        channel=channel,
        thread=channel if in_thread else None,
        parent=snowflake(box.get("parent_id")) if in_thread else None,
        user=user,
    )
    author = Author(id=user, name=mention(user), is_bot=person.get("bot") is True)
    match integer(d.get("type")):
        case 2:  # APPLICATION_COMMAND
            return _command(d, key, ref, author)
        case 3:  # MESSAGE_COMPONENT
            return _button(d, key, ref, author)
        case 5:  # MODAL_SUBMIT
            return _submit(d, key, ref, author)
        case other:
            return dropped(_KIND, key, f"interaction type {label(other)} is not handled")


def _command(d: Interaction, key: str, ref: PlatformRef, author: Author) -> CommandInvoked | None:
    data = mapping(d.get("data"))
    name = text(data.get("name"))
    if not name:
        return dropped(_KIND, key, "a command without data.name", malformed=True)
    args = " ".join(_option_words(mappings(data.get("options")), depth=0))
    args = args or text(data.get("target_id")) or ""
    return CommandInvoked(delivery_key=key, ref=ref, author=author, name=name, args=args)


def _button(d: Interaction, key: str, ref: PlatformRef, author: Author) -> ButtonPressed | None:
    data = mapping(d.get("data"))
    action = text(data.get("custom_id"))
    message = snowflake(mapping(d.get("message")).get("id"))
    if integer(data.get("component_type")) != _BUTTON:
        return dropped(_KIND, key, "a component that is not a button")
    if not (action and message):
        return dropped(_KIND, key, "a button without custom_id or message.id", malformed=True)
    ref = ref.model_copy(update={"message": message})
    return ButtonPressed(delivery_key=key, ref=ref, author=author, action=action)


def _submit(d: Interaction, key: str, ref: PlatformRef, author: Author) -> MessagePosted | None:
    answer = submitted_text(mapping(d.get("data")))
    if answer is None:
        return dropped(_KIND, key, "a modal submit that is no answer to a question")
    return MessagePosted(delivery_key=key, ref=ref, author=author, text=answer)


_MAX_DEPTH = 3
"""Options nest at most a group, a subcommand, then values (the application-command docs)."""


def _option_words(options: list[CommandOption], *, depth: int) -> list[str]:
    """Subcommand names and option values, depth first, as text."""
    words: list[str] = []
    for option in options:
        if integer(option.get("type")) in _SUBCOMMAND_TYPES:
            words.append(text(option.get("name")) or "")
            if depth < _MAX_DEPTH:
                words.extend(_option_words(mappings(option.get("options")), depth=depth + 1))
            continue
        value = option.get("value")
        if isinstance(value, bool):
            words.append("true" if value else "false")
        elif isinstance(value, str | int | float):
            words.append(str(value))
    return [word for word in words if word]
