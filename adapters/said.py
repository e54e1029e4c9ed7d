"""A failed connection to a platform, said in words: one line, never a repr.

aiohttp's connection errors print as their constructor's repr inside an error message
(``ClientConnectorError(ConnectionKey(host='127.0.0.1', port=9, ...), ...)``), which a
person starting the bot cannot use. :func:`connection_said` names the address and what
happened instead (aiohttp's client exceptions:
https://docs.aiohttp.org/en/stable/client_reference.html#client-exceptions).
"""

from __future__ import annotations

import errno

import aiohttp

_OS_WORDS = {
    errno.ECONNREFUSED: "connection refused (nothing listens there)",
    errno.ECONNRESET: "the connection was reset",
    errno.EHOSTUNREACH: "the host cannot be reached",
    errno.ENETUNREACH: "the network cannot be reached",
    errno.ETIMEDOUT: "the connection timed out",
}


def os_error_said(error: OSError) -> str:
    """An :class:`OSError` of a connection in words: ``connection refused (...)``, or its
    ``strerror`` in lower case, or its type's name when it has none."""
    if error.errno in _OS_WORDS:
        return _OS_WORDS[error.errno]
    if error.strerror:
        return error.strerror[0].lower() + error.strerror[1:]
    return str(error) or type(error).__name__


def connection_said(error: BaseException) -> str:
    """``error`` (raised while connecting to or talking with a platform) in one line.

    ``cannot connect to 127.0.0.1:9: connection refused (nothing listens there)``;
    ``the server at discord.com:443 answered 502 Bad Gateway`` (the host
    only: a URL may carry a query a person should not see); ``no answer in time``. Anything
    else: its message, or its type's name when it has none. Never raises.
    """
    match error:
        case aiohttp.ClientConnectorError():
            return f"cannot connect to {error.host}:{error.port}: {os_error_said(error.os_error)}"
        case aiohttp.WSServerHandshakeError():
            return f"the websocket handshake was refused ({error.status} {error.message})"
        case aiohttp.ClientResponseError():
            url = error.request_info.real_url if error.request_info else None
            where = f" at {url.host}:{url.port}" if url is not None and url.host else ""
            return f"the server{where} answered {error.status} {error.message}".rstrip()
        case aiohttp.ServerDisconnectedError():
            return "the server closed the connection"
        case TimeoutError():
            return "no answer in time"
        case OSError():
            return os_error_said(error)
    return str(error) or type(error).__name__
