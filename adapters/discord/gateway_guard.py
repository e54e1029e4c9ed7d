"""Keep discord.py's gateway connection alive through dispatches it cannot parse.

In discord.py 2.7, ``DiscordWebSocket.received_message`` (``discord/gateway.py``)
hands each dispatch's ``d`` to a parser looked up by event name,
``self._discord_parsers[event](data)``, with no ``try`` around the call. The parsers
are the ``parse_*`` methods of the client's ``ConnectionState``
(``discord/state.py``: ``ConnectionState.__init__`` collects them into the dict
``self.parsers``, keyed ``MESSAGE_CREATE`` ...), and they index the payload
directly (``data['author']``, ``int(data['id'])``). A dispatch with a missing or
unexpected field therefore raises out of ``received_message``, through
``poll_event`` and out of ``Client.connect``, which retries only connection
errors (``OSError``, ``ConnectionClosed`` ...): the exception ends
``Client.start`` and the bot stops receiving for good.

The narrowest hook is that dict. ``DiscordWebSocket.from_client`` gives every
connection the state's dict itself (``ws._discord_parsers =
client._connection.parsers``), for the first connection and for every resume
and reconnect, and nothing else reads it. :func:`guard_parsers` replaces each
parser in that dict, in place, by one that logs a failure with the event name and
returns: the dispatch is skipped (discord.py's cache does not learn it) and the
connection goes on with the next frame. Our own translators do not depend on it:
the runner sees every frame through ``log_receive``
(:func:`adapters.discord.shards.tap_frames`), which ``received_message`` calls
before the parser. What is left alone: frames that
break the handshake itself (a HELLO without ``heartbeat_interval``, a READY
without ``session_id``) still end the connection inside ``received_message``;
the runner's supervised restart (``keep_connected``) connects afresh then.

``client._connection`` is private API, so the guard checks its shape and logs,
instead of failing, when a discord.py release changes it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import discord

log = logging.getLogger(__name__)

Parser = Callable[[Any], None]

_GUARDED = "__threadbot_guarded__"


def guard_parsers(client: discord.Client) -> int:
    """Wrap every gateway parser of ``client`` (see the module docstring); the number wrapped.

    Idempotent: a parser wrapped already is left as it is. Call it once the
    client exists, before it connects.
    """
    parsers = getattr(getattr(client, "_connection", None), "parsers", None)
    if not isinstance(parsers, dict):
        log.warning("discord.py has no ConnectionState.parsers: malformed dispatches stay fatal")
        return 0
    wrapped = 0
    for name, parser in list(parsers.items()):
        if callable(parser) and not getattr(parser, _GUARDED, False):
            parsers[name] = _guarded(str(name), parser)
            wrapped += 1
    return wrapped


def _guarded(name: str, parser: Parser) -> Parser:
    @functools.wraps(parser)
    def parse(data: Any) -> None:
        try:
            parser(data)
        except Exception as exc:
            log.warning(
                "skipped the gateway dispatch %s: discord.py could not parse it (%s: %s)",
                name,
                type(exc).__name__,
                _short(exc),
            )

    setattr(parse, _GUARDED, True)
    return parse


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 200 else f"{text[:200]}..."
