"""Answering a Discord interaction in time, before the hub sees it.

Discord wants a first answer to every interaction within 3 s, or the person sees
"This interaction failed"
(https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction).
The runner answers with a deferral at once (:func:`defer`): a button and a form's
submit get DEFERRED_UPDATE_MESSAGE (type 6: nothing changes on screen), a command
and a feedback button DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE (type 5) as an ephemeral
"thinking..." (:func:`answered_alone`). What
the hub answers the person alone while it takes the command fills that placeholder
(:mod:`adapters.discord.answers`); once the hub has the command, a placeholder left
unanswered is deleted (:func:`close_deferred`): the bot answers in the thread instead
(https://discord.com/developers/docs/interactions/receiving-and-responding#delete-original-interaction-response).
The button that opens a question's form is answered with the form itself
(:func:`respond` with a MODAL, :mod:`adapters.discord.modals`): a modal can only be
the first answer. None of them raises: a failure is logged or ignored, since the
event goes to the hub either way.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import discord
import discord.http

from adapters.discord.outbound import EPHEMERAL
from adapters.discord.payload import snowflake, token
from adapters.discord.rest import REST_FAILURES
from adapters.discord.types import Interaction
from adapters.fields import mapping, text
from conversations.actions import FeedbackButton, decode

log = logging.getLogger(__name__)

MESSAGE_COMPONENT = 3
"""Interaction type of a button press (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-interaction-type)."""
MODAL_SUBMIT = 5
"""Interaction type of a modal's submit (the same page)."""

_DEFERRED_MESSAGE = 5
_DEFERRED_UPDATE = 6
"""Interaction callback types (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-interaction-callback-type)."""


def answered_alone(d: Interaction) -> bool:
    """Whether the hub answers the interaction ``d`` to its person alone: a command, or
    a press of a feedback button (its acknowledgement), read from ``data.custom_id``
    (:func:`conversations.actions.decode`); a form's submit and other buttons are not."""
    if d.get("type") == MODAL_SUBMIT:
        return False
    if d.get("type") != MESSAGE_COMPONENT:
        return True
    custom_id = text(mapping(d.get("data")).get("custom_id"))
    return custom_id is not None and isinstance(decode(custom_id), FeedbackButton)


async def defer(client: discord.Client, d: Interaction) -> bool:
    """Answer the interaction ``d`` at once with a deferral (see the module docstring):
    an ephemeral DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE when :func:`answered_alone`, else
    DEFERRED_UPDATE_MESSAGE.

    True when Discord took the answer; as :func:`respond`.
    """
    body: dict[str, Any] = (
        {"type": _DEFERRED_MESSAGE, "data": {"flags": EPHEMERAL}}
        if answered_alone(d)
        else {"type": _DEFERRED_UPDATE}
    )
    return await respond(client, d, body)


async def respond(client: discord.Client, d: Interaction, body: dict[str, Any]) -> bool:
    """Answer the interaction ``d`` with the callback ``body``:
    ``POST /interactions/{id}/{token}/callback``.

    True when Discord took the answer. Logs, and sends nothing, when ``d`` has no
    valid id (a snowflake) or token.
    """
    interaction, secret = snowflake(d.get("id")), token(d.get("token"))
    if interaction is None or secret is None:
        log.warning("could not answer an interaction without a valid id and token")
        return False
    route = discord.http.Route(
        "POST",
        "/interactions/{interaction_id}/{interaction_token}/callback",
        interaction_id=interaction,
        interaction_token=secret,
    )
    try:
        await client.http.request(route, json=body)
    except REST_FAILURES as exc:
        log.warning("could not answer the interaction %s: %s", interaction, exc)
        return False
    return True


async def close_deferred(client: discord.Client, d: Interaction) -> None:
    """Delete a command's deferred "thinking..." answer: the hub answers in the thread.

    ``DELETE /webhooks/{application_id}/{token}/messages/@original``; nothing when
    ``d`` has no valid token or application id, and a failure is ignored.
    """
    secret, application = token(d.get("token")), snowflake(d.get("application_id"))
    if secret is None or application is None:
        return
    route = discord.http.Route(
        "DELETE",
        "/webhooks/{webhook_id}/{webhook_token}/messages/@original",
        webhook_id=application,
        webhook_token=secret,
    )
    with contextlib.suppress(*REST_FAILURES):
        await client.http.request(route)
