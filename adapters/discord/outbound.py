"""Pure renderers for outbound Discord calls: a neutral action in, REST calls out.

:func:`render` turns an :data:`~conversations.events.OutboundAction` into the
:class:`RestCall` list the runner sends in order (method, path under the API
base ``https://discord.com/api/v10``, JSON body); no I/O here. The runner sends
them through discord.py's HTTP client, whose ``Route(method, path)`` also keys
its rate-limit buckets.

Where a message goes: on Discord a thread is a channel, so a reply, an edit or a
reaction goes to ``ref.thread`` when the ref has one and to ``ref.channel``
otherwise. Outside a guild (``ref.workspace == ""``: a DM) there are no
threads, so it goes to ``ref.channel``. The runner binds a DM conversation to the
DM channel itself (``thread == channel``), and then no ``message_reference`` is
added; a DM ref whose thread is an opening message gets one pointing at it.

Discord's limits that shape the calls:

- ``content`` is at most 2,000 characters; a ``nonce`` at most 25, and with
  ``enforce_nonce`` a second message with the same nonce from the same author
  within a few minutes returns the first instead of posting again
  (https://discord.com/developers/docs/resources/message#create-message);
- an action row holds at most 5 buttons and a message at most 5 action rows; a
  button's ``label`` is at most 80 characters and its ``custom_id`` 1 to 100, and
  the ``custom_id`` values of one message must differ
  (https://discord.com/developers/docs/components/reference#action-row,
  https://discord.com/developers/docs/components/reference#button);
- a reaction's emoji is URL-encoded in the path
  (https://discord.com/developers/docs/resources/message#create-reaction);
- a thread's name is 1 to 100 characters
  (https://discord.com/developers/docs/resources/channel#start-thread-from-message).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, assert_never
from urllib.parse import quote

from adapters.discord.modals import with_answer_button
from adapters.discord.plan_card import IS_COMPONENTS_V2, card_components
from adapters.errors import RenderError
from adapters.limits import cut_label, cut_to_fit
from conversations.emoji import normalize, to_unicode
from conversations.events import (
    AddReaction,
    Button,
    OutboundAction,
    PlanCard,
    PlatformRef,
    PostReply,
    SetSessionStatus,
    StartThread,
    UpdateMessage,
)
from conversations.textsplit import split_text

MAX_TEXT = 2000
MAX_NONCE = 25
MAX_BUTTONS_PER_ROW = 5
MAX_ROWS = 5
MAX_LABEL = 80
MAX_CUSTOM_ID = 100
MAX_THREAD_NAME = 100
DEFAULT_THREAD_NAME = "threadbot"


SUPPRESS_EMBEDS = 1 << 2
"""Message flag: no link previews under the bot's replies (like ``unfurl_links`` off on Slack)."""
EPHEMERAL = 1 << 6
"""Message flag: only the person who used the interaction sees the message; only an
interaction's response or followup can carry it
(https://discord.com/developers/docs/resources/message#message-object-message-flags)."""

_STYLES = {"primary": 1, "default": 2, "danger": 4}
"""Button styles: primary (blurple), secondary (grey), danger (red)."""

_MARKUP = re.compile(r"<(?:@[!&]?|#)\d+>")
_CUSTOM_EMOJI = re.compile(r"<a?:(\w+):\d+>")


@dataclass(frozen=True)
class RestCall:
    """One Discord REST call: ``method``, ``path`` (``/channels/{id}/messages``), JSON body."""

    method: str
    """``POST``, ``PATCH``, ``PUT`` or ``DELETE``."""
    path: str
    json: dict[str, Any] | None


def render(action: OutboundAction, *, nonce: str, max_text: int = MAX_TEXT) -> list[RestCall]:
    """The REST calls that perform ``action``, in the order to send them.

    ``nonce`` is the outbox key of the action; each posted message gets its own
    nonce derived from it (:func:`message_nonce`), so a retry of a half-sent
    reply returns the messages already posted instead of posting them twice.

    - :class:`PostReply`: one ``POST /channels/{thread or channel}/messages`` per
      chunk of at most ``max_text`` characters, split by
      :func:`~conversations.textsplit.split_text` (code blocks closed and
      reopened), with ``content``, ``nonce``, ``enforce_nonce: true``,
      ``allowed_mentions: {"parse": []}`` (with ``users``: the ids of
      :attr:`PostReply.mentions`, whose mention notifies) and ``flags`` SUPPRESS_EMBEDS. The
      last message carries the buttons as ``components``. ``ephemeral_to`` is
      ignored (Discord has ephemeral messages only as interaction responses: the
      sender answers a command with :func:`command_answer`), and the seeded
      ``reactions`` are not rendered here: see :func:`seed_reactions`.
      A reply with no text and no buttons gives ``[]`` (Discord refuses an empty
      message). A plan's message with a card that fits is one Components V2
      message instead (flags SUPPRESS_EMBEDS and IS_COMPONENTS_V2, ``components``
      the card, no ``content``: :mod:`adapters.discord.plan_card`).
    - :class:`UpdateMessage`: one ``PATCH /channels/{thread or channel}/messages/{id}``
      with ``content`` (cut at a boundary and ending in ``…`` past
      ``max_text``), ``components`` (always sent, so buttons left out are
      removed) and ``allowed_mentions``
      (https://discord.com/developers/docs/resources/message#edit-message); a
      plan's card that fits is sent as its Components V2 card, flags kept, no
      ``content``.
    - :class:`AddReaction`: one
      ``PUT /channels/{thread or channel}/messages/{id}/reactions/{emoji}/@me``
      with the emoji's character, URL-encoded; the name is mapped back with
      :func:`~conversations.emoji.to_unicode`.
    - :class:`StartThread`: its top-level post (:meth:`StartThread.post`) in
      ``ref.channel``; the thread is started on the message once it is posted
      (:func:`start_thread`: its id is known only then).
    - :class:`SetSessionStatus`: no call (Discord has no agent sessions: the sender
      makes ``processing`` the thread's typing indicator, :mod:`adapters.discord.typing`).

    Buttons (:func:`components`): rows of 5, at most 5 rows; further buttons and
    repeated actions are dropped. Raises ``ValueError`` when ``max_text`` is
    below 20, an edit or reaction has no ``ref.message``, a reaction's name has
    no unicode character (a custom emoji needs its id, which a name does not
    carry), or a button's action is longer than 100 characters (those three as
    :class:`~adapters.errors.RenderError`, a ``ValueError``).
    """
    match action:
        case PostReply():
            return _post(action, nonce, max_text)
        case UpdateMessage():
            return [_update(action, max_text)]
        case AddReaction():
            message = _message_id(action.ref, "reaction")
            return [_reaction(message_channel(action.ref), message, action.emoji)]
        case StartThread():
            return _post(action.post(), nonce, max_text)
        case SetSessionStatus():  # no sessions: the sender shows typing
            return []
        case _:
            assert_never(action)


def command_answer(
    action: PostReply,
    *,
    application: str,
    token: str,
    original: bool,
    max_text: int = MAX_TEXT,
) -> list[RestCall]:
    """The calls that answer a command with ``action``, seen by the person alone.

    The command was deferred with an ephemeral response, so the answer fills it:
    with ``original``, the first chunk edits it, ``PATCH
    /webhooks/{application}/{token}/messages/@original``
    (https://discord.com/developers/docs/interactions/receiving-and-responding#edit-original-interaction-response);
    every other chunk is an ephemeral followup, ``POST /webhooks/{application}/{token}``
    with ``flags`` EPHEMERAL and SUPPRESS_EMBEDS
    (https://discord.com/developers/docs/interactions/receiving-and-responding#create-followup-message).
    Chunks are split as :func:`render` splits a post; each has ``allowed_mentions``
    that ping no one, and the last carries the buttons. ``[]`` for no text and no
    buttons. ``application`` and ``token`` are the interaction's (a snowflake and a
    token checked by :mod:`adapters.discord.payload`). Raises what :func:`components`
    raises.
    """
    chunks = split_text(action.text, max_text)
    if not chunks and not action.buttons:
        return []
    chunks = chunks or [""]
    webhook = f"/webhooks/{application}/{token}"
    calls: list[RestCall] = []
    for part, chunk in enumerate(chunks):
        body: dict[str, Any] = {"content": chunk, "allowed_mentions": _no_mentions()}
        if part == len(chunks) - 1:
            body["components"] = components(action.buttons)
        if part == 0 and original:
            calls.append(RestCall("PATCH", f"{webhook}/messages/@original", body))
        else:
            calls.append(RestCall("POST", webhook, body | {"flags": EPHEMERAL | SUPPRESS_EMBEDS}))
    return calls


def seed_reactions(action: PostReply, channel: str, message_id: str) -> list[RestCall]:
    """``PUT .../reactions/{emoji}/@me`` calls for the reactions ``action`` seeds.

    ``channel`` and ``message_id`` identify the posted message (the last part of
    a split reply, which carries the buttons; in a thread, ``channel`` is the
    thread), known once the POST answered. Names are normalized and each is
    added once; a name with no unicode character is skipped, since the seeds
    decorate a message that is already posted.
    """
    names = dict.fromkeys(normalize(emoji) for emoji in action.reactions)
    return [_reaction(channel, message_id, name) for name in names if name and _character(name)]


def components(buttons: Sequence[Button]) -> list[dict[str, Any]]:
    """Action rows (type 1) of buttons (type 2) for ``buttons``, ``[]`` for none.

    ``custom_id`` is the button's value, ``style`` 1 (primary), 4 (danger) or
    2 (secondary, the default), ``label`` cut to 80 characters. A question's choices
    get "Answer in words" after them (:func:`adapters.discord.modals.with_answer_button`).
    Rows hold 5
    buttons and there are at most 5 rows: buttons past the 25th are dropped, as
    are buttons whose action repeats an earlier one (Discord refuses duplicate
    ``custom_id`` values). Raises :class:`~adapters.errors.RenderError` (a
    ``ValueError``) for an action longer than 100 characters, which cannot be cut
    without breaking the button.
    """
    unique: dict[str, Button] = {}
    for button in with_answer_button(buttons):  # a question's choices: and a form
        unique.setdefault(button.value, button)
    kept = list(unique.values())[: MAX_BUTTONS_PER_ROW * MAX_ROWS]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(kept), MAX_BUTTONS_PER_ROW):
        row = kept[start : start + MAX_BUTTONS_PER_ROW]
        rows.append({"type": 1, "components": [_button(button) for button in row]})
    return rows


def message_nonce(key: str, part: int = 0) -> str:
    """The ``nonce`` of message ``part`` (from 0) of the outbox row ``key``: stable, <= 25 chars.

    The key itself for part 0 when it fits, else the first 25 hex digits of the
    SHA-256 of part and key. Discord echoes the nonce in the MESSAGE_CREATE of
    the bot's own message, so the runner can match a half-sent row by it.
    """
    if part == 0 and 0 < len(key) <= MAX_NONCE:
        return key
    return hashlib.sha256(f"{part}:{key}".encode()).hexdigest()[:MAX_NONCE]


def start_thread(channel: str, message: str, text: str) -> RestCall:
    """``POST /channels/{channel}/messages/{message}/threads`` with a name from ``text``
    (:func:`thread_name`): a public thread on the message, whose id is the message's
    (https://discord.com/developers/docs/resources/channel#start-thread-from-message)."""
    return RestCall(
        "POST", f"/channels/{channel}/messages/{message}/threads", {"name": thread_name(text)}
    )


def thread_name(text: str) -> str:
    """A thread name from the request ``text``: one line, 1 to 100 characters.

    User, role and channel mentions are removed (a thread name shows them as raw
    ids), a custom emoji becomes ``:name:``, whitespace runs become one space. A
    longer text is cut at a word boundary where one is near, ending in ``…``. A
    text with nothing left gives ``"threadbot"``.
    """
    plain = _CUSTOM_EMOJI.sub(r":\1:", _MARKUP.sub(" ", text))
    name = " ".join(plain.split())
    if len(name) > MAX_THREAD_NAME:
        cut = name[: MAX_THREAD_NAME - 1]
        space = cut.rfind(" ")
        name = (cut[:space] if space >= MAX_THREAD_NAME // 2 else cut).rstrip() + "…"
    return name or DEFAULT_THREAD_NAME


# --- helpers ---------------------------------------------------------------------


def _post(action: PostReply, key: str, max_text: int) -> list[RestCall]:
    card = _card(action.text, action.plan, action.buttons, mentions=bool(action.mentions))
    if card is not None:  # one Components V2 message: no content, its text in the card
        v2: dict[str, Any] = {
            "nonce": message_nonce(key),
            "enforce_nonce": True,
            "allowed_mentions": _no_mentions(action.mentions),
            "flags": SUPPRESS_EMBEDS | IS_COMPONENTS_V2,
            "components": card,
        }
        return [RestCall("POST", f"/channels/{message_channel(action.ref)}/messages", v2)]
    chunks = split_text(action.text, max_text)
    if not chunks and not action.buttons:
        return []
    chunks = chunks or [""]
    path = f"/channels/{message_channel(action.ref)}/messages"
    calls: list[RestCall] = []
    for part, chunk in enumerate(chunks):
        body: dict[str, Any] = {
            "content": chunk,
            "nonce": message_nonce(key, part),
            "enforce_nonce": True,
            "allowed_mentions": _no_mentions(action.mentions),
            "flags": SUPPRESS_EMBEDS,
        }
        opener = action.ref.thread if action.ref.thread != action.ref.channel else None
        if part == 0 and not action.ref.workspace and opener:  # a DM bound to its channel: none
            body["message_reference"] = {
                "message_id": action.ref.thread,
                "fail_if_not_exists": False,
            }
        if part == len(chunks) - 1 and action.buttons:
            body["components"] = components(action.buttons)
        calls.append(RestCall("POST", path, body))
    return calls


def _update(action: UpdateMessage, max_text: int) -> RestCall:
    message = _message_id(action.ref, "edit")
    path = f"/channels/{message_channel(action.ref)}/messages/{message}"
    card = _card(action.text, action.plan, action.buttons, mentions=False)
    if card is not None:  # the plan's card, as it stands now: the flag stays
        flags = SUPPRESS_EMBEDS | IS_COMPONENTS_V2
        body_v2 = {"flags": flags, "components": card, "allowed_mentions": _no_mentions()}
        return RestCall("PATCH", path, body_v2)
    body = {
        "content": cut_to_fit(action.text, max_text),  # an edit cannot split
        "components": components(action.buttons),
        "allowed_mentions": _no_mentions(),
    }
    return RestCall("PATCH", path, body)


def _card(
    text: str, plan: PlanCard | None, buttons: tuple[Button, ...], *, mentions: bool
) -> list[dict[str, Any]] | None:
    """A plan's message as Components V2 components, or None (no card, or it does not
    fit: :mod:`adapters.discord.plan_card`)."""
    if plan is None:
        return None
    return card_components(text, plan, buttons, mentions=mentions, button=_button)


def _reaction(channel: str, message: str, emoji: str) -> RestCall:
    character = _character(emoji)
    if character is None:
        raise RenderError(f"no unicode emoji for {emoji!r}: Discord needs the character")
    encoded = quote(character, safe="")
    return RestCall("PUT", f"/channels/{channel}/messages/{message}/reactions/{encoded}/@me", None)


def _character(emoji: str) -> str | None:
    """The unicode character for an emoji name, or None if there is none."""
    character = to_unicode(emoji)
    return character if character and not character.isascii() else None


def _button(button: Button) -> dict[str, Any]:
    value = button.value
    if not 0 < len(value) <= MAX_CUSTOM_ID:
        raise RenderError(f"a Discord custom_id is 1 to {MAX_CUSTOM_ID} characters, got {value!r}")
    label = cut_label(button.label.strip() or value, MAX_LABEL)
    return {
        "type": 2,
        "style": _STYLES[button.style],
        "label": label,
        "custom_id": value,
    }


def _no_mentions(users: tuple[str, ...] = ()) -> dict[str, Any]:
    """``allowed_mentions`` that pings nobody but ``users`` (the ids a post mentions on
    purpose: :attr:`PostReply.mentions`), a fresh dict for each body: the model's text
    never notifies anyone
    (https://discord.com/developers/docs/resources/message#allowed-mentions-object)."""
    return {"parse": [], "users": list(users)} if users else {"parse": []}


def message_channel(ref: PlatformRef) -> str:
    """The channel a message of ``ref`` is in: its thread in a guild, else the channel."""
    return ref.thread if ref.thread and ref.workspace else ref.channel


def _message_id(ref: PlatformRef, what: str) -> str:
    if not ref.message:
        raise RenderError(f"a Discord {what} needs ref.message (the message id)")
    return ref.message
