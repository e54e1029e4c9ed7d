"""The raw Slack payloads the adapter reads, typed as ``TypedDict`` classes.

As discord.py types Discord's (``discord/types/``): each class is the JSON object
Slack documents, with the fields the adapter reads or that identify the object,
and a link to its page. A field Slack leaves out of some payloads is
``NotRequired``; fields the adapter never reads are left out (a payload holding
them is still that type).

These types describe what Slack *should* send. What arrives is JSON (or a form)
from the network, so the translators read every field through the checks of
:mod:`adapters.fields`, with ``.get``, and never trust a field's type;
:mod:`adapters.slack.envelopes` refuses a delivery whose shape slack-bolt cannot
read before it gets that far.

How each delivery arrives, and the type of what the translators get:

- an Events API request body, or the ``payload`` of a Socket Mode ``events_api``
  envelope: :class:`EventCallback` (its ``event``: :class:`MessageEvent` for
  ``message`` and ``app_mention``, :class:`ReactionEvent` for ``reaction_added``
  and ``reaction_removed``);
- a slash command (a form, or a ``slash_commands`` envelope's ``payload``):
  :class:`SlashCommand`;
- a button (the JSON in a form's ``payload`` field, or an ``interactive``
  envelope's ``payload``): :class:`BlockActions`;
- over Socket Mode, each of them inside a :class:`SocketModeEnvelope`.

Web API answers the runner reads: :class:`AuthTest`, :class:`BotsInfo`,
:class:`ConversationsReplies`, :class:`PostMessageAnswer`.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class SocketModeEnvelope(TypedDict):
    """A Socket Mode message that carries a request for the app
    (https://docs.slack.dev/apis/events-api/using-socket-mode/).

    ``type``: ``events_api``, ``interactive`` or ``slash_commands``; ``payload`` is
    what an HTTP request would carry as its body. The app acks it by sending
    ``{"envelope_id": ...}`` back; ``retry_attempt`` counts Slack's retries of an
    event.
    """

    envelope_id: str
    type: str
    payload: dict[str, Any]
    accepts_response_payload: bool
    retry_attempt: NotRequired[int]
    retry_reason: NotRequired[str]


class BotProfile(TypedDict, total=False):
    """A bot's profile on its messages: ``app_id`` is the app that posted, ``name`` its name
    (https://docs.slack.dev/reference/events/message/bot_message)."""

    id: str
    app_id: str
    name: str


class TextStyle(TypedDict, total=False):
    """A rich-text element's ``style``; ``code`` marks inline code
    (https://docs.slack.dev/reference/block-kit/block-elements/rich-text-section-element)."""

    bold: bool
    italic: bool
    strike: bool
    code: bool


class RichTextNode(TypedDict, total=False):
    """A ``rich_text`` block, or one of its elements at any depth
    (https://docs.slack.dev/reference/block-kit/blocks/rich-text-block).

    ``type`` says which: ``rich_text`` (a block), ``rich_text_section``,
    ``rich_text_list``, ``rich_text_preformatted`` (code), ``rich_text_quote``
    (these hold ``elements``), or an inline element such as ``text`` or ``user``
    (https://docs.slack.dev/reference/block-kit/block-elements/user-element: its
    ``user_id``), with a ``style``.
    """

    type: str
    elements: list[RichTextNode]
    user_id: str
    text: str
    style: TextStyle


class File(TypedDict, total=False):
    """A file shared with a message (https://api.slack.com/types/file,
    https://docs.slack.dev/reference/objects/file-object); the runner reads the
    ``name`` of the files it uploaded, the translators the rest.

    ``url_private`` and ``url_private_download`` (on ``files.slack.com``) answer only
    with ``Authorization: Bearer`` and a token with the ``files:read`` scope;
    ``mimetype`` is the file's MIME type, ``size`` its bytes. ``mode`` is ``hosted``
    (uploaded), ``snippet``, ``post``, ``external`` (``is_external``: the URLs point
    at another service), ``tombstone`` (deleted) or ``hidden_by_limit`` (past a free
    workspace's history); a file shared from another organisation may come as
    ``{"id", "file_access": "check_file_info"}`` with no URL at all.
    """

    id: str
    name: str
    title: str
    mimetype: str
    filetype: str
    size: int
    mode: str
    is_external: bool
    url_private: str
    url_private_download: str
    file_access: str


class MessageEvent(TypedDict):
    """A ``message`` or ``app_mention`` event
    (https://docs.slack.dev/reference/events/message,
    https://docs.slack.dev/reference/events/app_mention).

    ``ts`` is the message's id in its ``channel``; ``thread_ts`` the ts of its
    thread's first message, left out at the top level. ``text`` is mrkdwn with
    ``&``, ``<`` and ``>`` escaped; ``blocks`` holds the ``rich_text`` a client
    composed. ``subtype`` is left out for a person's plain message
    (``bot_message``, ``message_changed``, ``thread_broadcast``, ...);
    ``message_changed`` carries the edited message in ``message``
    (https://docs.slack.dev/reference/events/message/message_changed).
    ``channel_type`` (``channel``, ``group``, ``im``, ``mpim``) comes with
    ``message``, not with ``app_mention``. A bot's message has ``bot_id``,
    ``app_id``, ``bot_profile`` and maybe ``username``; ``hidden`` marks events
    not shown in the channel. ``files``: the files shared with it (a ``file_share``
    message, or a mention that shares files).
    """

    type: str
    subtype: NotRequired[str]
    channel: str
    user: NotRequired[str]
    text: str
    ts: str
    thread_ts: NotRequired[str]
    channel_type: NotRequired[str]
    blocks: NotRequired[list[RichTextNode]]
    bot_id: NotRequired[str]
    app_id: NotRequired[str]
    bot_profile: NotRequired[BotProfile]
    username: NotRequired[str]
    hidden: NotRequired[bool]
    message: NotRequired[MessageEvent]
    files: NotRequired[list[File]]
    event_ts: str


class ReactionItem(TypedDict):
    """What a reaction is on: for a message, ``type`` ``message``, its ``channel`` and ``ts``."""

    type: str
    channel: str
    ts: str


class ReactionEvent(TypedDict):
    """A ``reaction_added`` or ``reaction_removed`` event
    (https://docs.slack.dev/reference/events/reaction_added,
    https://docs.slack.dev/reference/events/reaction_removed).

    ``user`` reacted with ``reaction`` (an emoji name without colons, maybe with a
    ``::skin-tone-N`` suffix) on ``item``; ``item_user`` wrote the item, left out
    for messages no user wrote (incoming webhooks).
    """

    type: str
    user: str
    reaction: str
    item_user: NotRequired[str]
    item: ReactionItem
    event_ts: str


class AgentSessionStoppedEvent(TypedDict):
    """An ``agent_session_stopped`` event: ``user`` pressed Slack's stop button on the
    agent session of ``thread_ts`` in ``channel``; ``streaming_message_ts`` lists the
    app's streams Slack stopped (empty when none)
    (https://docs.slack.dev/reference/events/agent_session_stopped)."""

    type: str
    channel: str
    thread_ts: str
    user: str
    event_ts: str
    streaming_message_ts: NotRequired[list[str]]


class Authorization(TypedDict, total=False):
    """One installation the event is visible to (https://docs.slack.dev/apis/events-api/#authorizations)."""

    enterprise_id: str | None
    team_id: str | None
    user_id: str
    is_bot: bool


class EventCallback(TypedDict):
    """An Events API request body (https://docs.slack.dev/apis/events-api/#callback-field).

    ``type`` is ``event_callback`` (a ``url_verification`` handshake has other
    fields); ``event_id`` is unique per event and kept by Slack's retries;
    ``team_id`` is the workspace the event happened in.
    """

    type: str
    token: str
    team_id: str
    api_app_id: str
    event: MessageEvent | ReactionEvent | AgentSessionStoppedEvent
    event_id: str
    event_time: int
    authorizations: NotRequired[list[Authorization]]


class SlashCommand(TypedDict):
    """A slash command's form fields, each a string
    (https://docs.slack.dev/interactivity/implementing-slash-commands#app_command_handling).

    ``command`` is the name with its slash (``/stop``), ``text`` what was typed
    after it; ``trigger_id`` is unique per invocation. Slack sends no thread.
    """

    token: str
    command: str
    text: str
    team_id: str
    enterprise_id: NotRequired[str]
    channel_id: str
    user_id: str
    api_app_id: str
    response_url: str
    trigger_id: str


class InteractionUser(TypedDict, total=False):
    """Who pressed: ``id`` and the ``team_id`` they belong to."""

    id: str
    team_id: str
    username: str


class IdObject(TypedDict, total=False):
    """A ``team``, ``channel`` or ``enterprise`` in an interaction payload: its ``id``
    (and a name Slack may send with it)."""

    id: str
    domain: str
    name: str


class Container(TypedDict, total=False):
    """Where the pressed element is: for a message, its ``channel_id``, ``message_ts``
    and, in a thread, ``thread_ts``."""

    type: str
    channel_id: str
    message_ts: str
    thread_ts: str
    is_ephemeral: bool


class BlockAction(TypedDict):
    """One action in a ``block_actions`` payload: for a button, the button's
    ``action_id`` and ``value`` (https://docs.slack.dev/reference/block-kit/block-elements/button-element)."""

    type: str
    action_id: str
    block_id: str
    value: NotRequired[str]
    action_ts: str


class BlockActions(TypedDict):
    """A ``block_actions`` interaction payload
    (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload).

    ``actions`` holds the one element pressed; ``container`` says where it is,
    ``channel`` and ``message`` are there for a message (``message.thread_ts`` in a
    thread). ``team`` is null for an org-wide app outside a workspace.
    """

    type: str
    trigger_id: str
    api_app_id: str
    user: InteractionUser
    team: IdObject | None
    enterprise: NotRequired[IdObject | None]
    container: Container
    channel: NotRequired[IdObject]
    message: NotRequired[MessageEvent]
    actions: list[BlockAction]
    response_url: NotRequired[str]


class AuthTest(TypedDict):
    """``auth.test``'s answer (https://docs.slack.dev/reference/methods/auth.test):
    the bot user's ``user_id``, its ``bot_id`` (for a bot token) and ``team_id``."""

    ok: bool
    user_id: str
    team_id: str
    bot_id: NotRequired[str]
    enterprise_id: NotRequired[str]


class BotInfo(TypedDict, total=False):
    """``bots.info``'s ``bot``: its ``id`` and the ``app_id`` it belongs to."""

    id: str
    app_id: str
    name: str


class BotsInfo(TypedDict):
    """``bots.info``'s answer (https://docs.slack.dev/reference/methods/bots.info)."""

    ok: bool
    bot: BotInfo


class OutboxPayload(TypedDict):
    """The ``event_payload`` the bot puts in each message's metadata: its outbox key and part."""

    key: str
    part: int


class MessageMetadata(TypedDict):
    """A message's ``metadata`` (https://docs.slack.dev/messaging/message-metadata)."""

    event_type: str
    event_payload: OutboxPayload


class Reply(TypedDict):
    """A message in ``conversations.replies``: its ``ts``, ``metadata`` and ``files``."""

    ts: str
    metadata: NotRequired[MessageMetadata]
    files: NotRequired[list[File]]


class ConversationsReplies(TypedDict):
    """``conversations.replies``' answer (https://docs.slack.dev/reference/methods/conversations.replies):
    the thread's messages, its first message first."""

    ok: bool
    messages: list[Reply]


class PostMessageAnswer(TypedDict, total=False):
    """``chat.postMessage``'s answer: the new message's ``ts`` in ``channel``
    (https://docs.slack.dev/reference/methods/chat.postMessage); ``chat.postEphemeral``
    answers ``message_ts`` instead (https://docs.slack.dev/reference/methods/chat.postEphemeral)."""

    ok: bool
    channel: str
    ts: str
    message_ts: str
