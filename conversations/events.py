"""The platform-neutral chat vocabulary: inbound events and outbound actions.

Adapters translate platform payloads into :data:`InboundEvent` and render
:data:`OutboundAction` into platform calls. Both are frozen pydantic models in
tagged unions (``kind``), serialised with one ``TypeAdapter`` each.

Platform identity travels as one :class:`PlatformRef`. Its ``thread`` is the id of
the thread's root message (Slack ``thread_ts``, a Discord thread channel id, a
console message id); ``message`` is the message the event is about.
"""

from __future__ import annotations

from typing import Annotated, Literal, assert_never

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, TypeAdapter

from conversations.actions import ButtonAction, decode, encode
from core.vocabulary.audit import Means
from core.vocabulary.run_events import StepStatus


class PlatformRef(BaseModel):
    """Where something is on a platform: ``(platform, workspace, channel, thread, message, user)``.

    ``workspace`` is a Slack team or a Discord guild (empty for the console and
    DMs); ``thread`` is None for a top-level message; ``user`` is the platform
    user id of whoever the event is from. ``parent``: where a thread is a channel
    of its own (Discord), the channel it was started in, when known (a channel's
    settings apply in its threads); None elsewhere.
    """

    model_config = ConfigDict(frozen=True)

    platform: str
    workspace: str = ""
    channel: str
    thread: str | None = None
    message: str | None = None
    user: str | None = None
    parent: str | None = None

    @property
    def home(self) -> str:
        """The channel whose settings apply here: ``parent`` if known, else ``channel``."""
        return self.parent or self.channel

    def in_thread(self, thread: str) -> PlatformRef:
        """The same place, inside ``thread``, about no particular message."""
        return self.model_copy(update={"thread": thread, "message": None})


class Author(BaseModel):
    """Who sent an inbound event: platform user id, display name, whether a bot."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    is_bot: bool = False


# --- inbound ---------------------------------------------------------------------


class Attachment(BaseModel):
    """A file shared with a message, as the platform describes it; its bytes are not here.

    The adapter of ``platform`` fetches it when the hub asks
    (:class:`conversations.files.FileFetcher`). ``id``: the platform's file id (Slack
    ``F...``, a Discord attachment snowflake); ``name``: its file name as shown;
    ``url``: where the adapter fetches it (Slack ``url_private_download``, Discord
    ``url``), ``""`` when the platform gave none (a deleted file, one Slack withheld);
    ``media_type``: the MIME type the platform gives, ``application/octet-stream``
    when none; ``size``: bytes as the platform says, None when it does not.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    url: str = ""
    media_type: str = "application/octet-stream"
    size: int | None = None


class MessagePosted(BaseModel):
    """A person posted a message.

    ``delivery_key`` is unique per platform delivery (Slack ``event_id`` or
    ``team:channel:ts``, Discord message id); the hub records it to drop duplicates.
    ``mentions_bot`` starts a conversation outside a thread; in a conversation's
    thread every message counts.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["message_posted"] = "message_posted"
    delivery_key: str
    ref: PlatformRef
    author: Author
    text: str
    mentions_bot: bool = False
    unreadable: bool = False
    """The platform withheld the text (Discord without the Message Content intent):
    the hub tells the thread instead of taking an empty answer."""
    attachments: tuple[Attachment, ...] = ()
    """Files shared with the message, in the order the platform lists them; the hub
    fetches them for the conversation (:mod:`conversations.files`)."""


class ReactionChanged(BaseModel):
    """A reaction was added (``added``) or removed on ``ref.message``.

    ``emoji`` is normalized by :func:`conversations.emoji.normalize` (a shortcode
    name such as ``white_check_mark``, without skin tone).
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["reaction_changed"] = "reaction_changed"
    delivery_key: str
    ref: PlatformRef
    author: Author
    emoji: str
    added: bool = True


class CommandInvoked(BaseModel):
    """A command such as ``/stop``: its name without the slash, its argument text.

    ``means``: how the person gave it, as the adapter knows (the audit trail records it):
    typed (``command``), Slack's stop button on the thread's agent session
    (``native_stop``, ``agent_session_stopped``), or the console's reaction on one call
    of a tool approval (``reaction``, ``+✅ N.K``).
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["command_invoked"] = "command_invoked"
    delivery_key: str
    ref: PlatformRef
    author: Author
    name: str
    args: str = ""
    means: Literal["command", "native_stop", "reaction"] = "command"


class ButtonPressed(BaseModel):
    """A person pressed a button the bot put under ``ref.message``.

    ``action`` is the value the platform handed back (Slack's ``value``, Discord's
    ``custom_id``): the :attr:`Button.value` of the button, or a value posted by an
    older threadbot. The hub reads it with :func:`conversations.actions.decode`.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["button_pressed"] = "button_pressed"
    delivery_key: str
    ref: PlatformRef
    author: Author
    action: str


InboundEvent = Annotated[
    MessagePosted | ReactionChanged | CommandInvoked | ButtonPressed,
    Field(discriminator="kind"),
]
inbound_adapter: TypeAdapter[InboundEvent] = TypeAdapter(InboundEvent)


def means_of(event: InboundEvent) -> Means:
    """How the person acted, for the audit trail: a message in a thread is a ``reply``, a
    reaction a ``reaction``, a button a ``button``; a command says its own
    (:attr:`CommandInvoked.means`)."""
    match event:
        case MessagePosted():
            return "reply"
        case ReactionChanged():
            return "reaction"
        case ButtonPressed():
            return "button"
        case CommandInvoked():
            return event.means
        case _:
            assert_never(event)


# --- outbound --------------------------------------------------------------------


def _action_of(value: object) -> object:
    """A stored button's action: a value string (:func:`encode`, or an older form) is
    decoded; anything else is validated as the action itself."""
    if isinstance(value, str):
        action = decode(value)
        if action is None:
            raise ValueError(f"not a button action: {value!r}")
        return action
    return value


class Button(BaseModel):
    """A button under a message; pressing it hands :attr:`value` back to the hub.

    ``action`` is what the button does; it is stored (in the outbox) and sent as its
    :attr:`value`. A string is taken as such a value, in any form ever posted
    (:func:`conversations.actions.decode`).
    """

    model_config = ConfigDict(frozen=True)

    label: str
    action: Annotated[ButtonAction, BeforeValidator(_action_of), PlainSerializer(encode)]
    style: Literal["primary", "danger", "default"] = "default"

    @property
    def value(self) -> str:
        """What the platform carries for this button and hands back when it is pressed
        (Slack ``action_id`` and ``value``, Discord ``custom_id``): at most 100 characters."""
        return encode(self.action)


ANSWER = "answer"
"""``purpose`` of a run's answer row (a milestone), which finalises its streamed preview."""


TOO_LONG = "\n… _(too long to show as it is written: the whole answer follows)_"
"""What ends a streamed preview of an answer too long for one message."""


class StreamedPreview(BaseModel):
    """A post whose preview was streamed already into the bot's message ``message``
    (docs/architecture.md "Streamed answers"): ``open`` when the stream still takes
    text, so the post finalises it; else (the platform ended it, or it failed) the post
    is edited into that message."""

    model_config = ConfigDict(frozen=True)
    message: str
    open: bool


class PlanTask(BaseModel):
    """One step of a plan card: its words and where it stands (pending, in_progress,
    complete, error: :data:`core.vocabulary.run_events.StepStatus`)."""

    model_config = ConfigDict(frozen=True)
    title: str
    status: StepStatus = "pending"


class PlanCard(BaseModel):
    """A plan drawn as a card where the platform has one (Slack's ``plan`` block of
    ``task_card`` blocks, docs/architecture.md, "Plan cards"): ``title`` (``Plan
    (v1)``), ``version``, a task per step, and ``note``, one line under it (the hint
    while it waits, the outcome once decided). The message's text says the same for
    the platforms without cards and as the notification's fallback."""

    model_config = ConfigDict(frozen=True)
    title: str
    version: int
    tasks: tuple[PlanTask, ...]
    note: str = ""


class PostReply(BaseModel):
    """Post ``text`` as a reply in ``ref.thread`` (top level when ``thread`` is None).

    ``reactions`` are the bot's own reactions to seed on the new message.
    ``ephemeral_to`` (a platform user id) shows the message to that person only,
    where the platform can (Slack ``chat.postEphemeral``); elsewhere it is posted.
    ``streamed``: the answer's preview streamed already (set by the deliverer at the
    send, never stored with the row), which the post finalises instead of posting anew.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["post_reply"] = "post_reply"
    ref: PlatformRef
    text: str
    buttons: tuple[Button, ...] = ()
    reactions: tuple[str, ...] = ()
    ephemeral_to: str | None = None
    status: str | None = None
    """A progress note's status line (its request's running totals and cost): the
    ``status`` progress mode shows the newest one under the notes of its status
    reply; a note posted as a reply of its own leaves it out."""
    plan: PlanCard | None = None
    """A plan's card (its steps and their statuses), drawn where the platform can."""
    mentions: tuple[str, ...] = ()
    """Platform user ids the text mentions on purpose, in its last line (the requester:
    :func:`conversations.render.render_event`): the adapter lets those mentions notify
    (Discord's ``allowed_mentions``; every other mention pings nobody there)."""
    streamed: StreamedPreview | None = Field(default=None, exclude=True)


class UpdateMessage(BaseModel):
    """Replace the text (and buttons, and plan card) of the bot's message ``ref.message``."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["update_message"] = "update_message"
    ref: PlatformRef
    text: str
    buttons: tuple[Button, ...] = ()
    plan: PlanCard | None = None


class AddReaction(BaseModel):
    """Add the bot's reaction ``emoji`` (a normalized name) to ``ref.message``."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["add_reaction"] = "add_reaction"
    ref: PlatformRef
    emoji: str


START_TEXT_CHARS = 1_800
"""Characters of a :class:`StartThread` text at most: one message on every platform
(Discord's 2,000, Slack's 3,900 per part), so the thread starts on the one message."""


class StartThread(BaseModel):
    """Post ``text`` at the top of ``ref.channel`` (``ref.thread`` None) as one message
    and start a thread on it; the sender returns the thread's id (the message's own id
    on every platform: Slack's ``ts``, the console's number, and on Discord the thread
    channel started from the message, whose id is the message's).

    A scheduled run opens its conversation with it (docs/architecture.md, "Scheduled
    runs"): once sent, the conversation is bound to :meth:`thread_ref`.
    ``thread_is_channel``: the platform's threads are channels of their own (Discord), so
    the thread's messages come with the thread as their channel, as a mention's do
    (``adapters/discord/translate.py`` ``opened_in_thread``).
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["start_thread"] = "start_thread"
    ref: PlatformRef
    text: str = Field(max_length=START_TEXT_CHARS)
    thread_is_channel: bool = False

    def post(self) -> PostReply:
        """The top-level post this starts with."""
        return PostReply(ref=self.ref.model_copy(update={"thread": None}), text=self.text)

    def thread_ref(self, thread: str) -> PlatformRef:
        """Where the thread ``thread`` (the id the sender returned) is, about no message:
        in ``ref.channel``, or, where threads are channels, the thread itself with
        ``ref.channel`` as its ``parent``."""
        if self.thread_is_channel:
            return self.ref.model_copy(
                update={
                    "channel": thread,
                    "thread": thread,
                    "parent": self.ref.channel,
                    "message": None,
                    "user": None,
                }
            )
        return self.ref.in_thread(thread).model_copy(update={"user": None})


SessionStatus = Literal["processing", "suspended", "active", "closed"]
"""Where a thread's agent session stands: a run works, waits for a person, has
answered, or was stopped or expired (docs/architecture.md, "Agent sessions")."""

SESSION_TITLE_CHARS = 100
"""Characters of a session's title at most (the first line of the request, cut)."""


class SetSessionStatus(BaseModel):
    """Mark the agent session of the thread ``ref.thread`` ``status`` (creating it if
    there is none), where the platform has sessions (Slack's
    ``agents.sessions.setStatus``: https://docs.slack.dev/ai/agent-sessions); on Discord
    ``processing`` keeps the thread's typing indicator on, any other status lets it fade
    (docs/architecture.md, "Agent sessions"); elsewhere it does nothing. ``title`` (at
    most :data:`SESSION_TITLE_CHARS`) and ``initiator`` (a platform user id) name a new
    session: the request that opened the run and its author; empty or None when the
    change that made it carried no request. Idempotent: sent again after a crash it
    changes nothing."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["set_session_status"] = "set_session_status"
    ref: PlatformRef
    status: SessionStatus
    title: str = Field("", max_length=SESSION_TITLE_CHARS)
    initiator: str | None = None


OutboundAction = Annotated[
    PostReply | UpdateMessage | AddReaction | StartThread | SetSessionStatus,
    Field(discriminator="kind"),
]
outbound_adapter: TypeAdapter[OutboundAction] = TypeAdapter(OutboundAction)
