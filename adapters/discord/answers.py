"""Answering a person's command to them alone: its deferred ephemeral response.

Discord shows a message to one person only as the response to their interaction,
or a followup of it, with the EPHEMERAL flag
(https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-messages).
The runner defers a command at once with an ephemeral "thinking..."
(:func:`adapters.discord.acks.defer`), then hands it to the hub, which answers
some commands to the person alone: an unknown command, ``/threadbot settings``,
``/stop`` with nothing to stop, and the acknowledgement of a feedback button, which
the runner defers the same way (a :class:`~conversations.events.PostReply` with
``ephemeral_to``, sent at once, while the hub takes the command or the press).

:class:`CommandAnswers` joins the two: while a command is handed over, the runner
keeps it open here (:meth:`CommandAnswers.open`), and the sender
(:mod:`adapters.discord.sending`) answers an ephemeral reply to that person in that
channel through the command's response
(:func:`adapters.discord.outbound.command_answer`) instead of posting it. A
deferral no reply filled is deleted afterwards, as before. Without an open command
(a reply sent later, or a deferral Discord refused) ``ephemeral_to`` is ignored and
the reply is posted in the channel.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from adapters.discord.payload import snowflake, token
from adapters.discord.types import Interaction
from conversations.events import ButtonPressed, CommandInvoked, PostReply


@dataclass
class OpenCommand:
    """A command being handed to the hub, whose ephemeral deferral can take an answer.

    ``application`` and ``token`` name the interaction's webhook; ``answered``:
    its deferral was filled (later parts of an answer are followups).
    """

    application: str
    token: str
    answered: bool = False


class CommandAnswers:
    """The commands open for an answer, by ``(channel, user)`` (module docstring).

    The runner takes one interaction at a time, so at most one is open; the key
    makes sure a reply reaches only the person who used the command, in its channel.
    """

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], OpenCommand] = {}

    @contextlib.contextmanager
    def open(
        self, d: Interaction, event: CommandInvoked | ButtonPressed
    ) -> Iterator[OpenCommand | None]:
        """Keep the command ``event`` (from the interaction ``d``) open while the block runs.

        Yields None, and keeps nothing, when ``d`` has no valid token or
        application id to answer through.
        """
        secret, application = token(d.get("token")), snowflake(d.get("application_id"))
        if secret is None or application is None:
            yield None
            return
        key = (event.ref.channel, event.author.id)
        command = self._open[key] = OpenCommand(application=application, token=secret)
        try:
            yield command
        finally:
            if self._open.get(key) is command:
                del self._open[key]

    def answering(self, action: PostReply) -> OpenCommand | None:
        """The open command ``action`` answers: an ephemeral reply to its user, in its channel."""
        if action.ephemeral_to is None:
            return None
        return self._open.get((action.ref.channel, action.ephemeral_to))
