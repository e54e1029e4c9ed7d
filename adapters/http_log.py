"""The log of the bot's HTTP servers (the operations address, Slack's events port).

A request aiohttp cannot parse is anyone's to send: it must not write a traceback, nor
the request's own bytes, into the operator's log (docs/architecture.md, "Operating
threadbot").
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """An HTTP server's log (aiohttp's ``logger`` of the request handler,
    https://docs.aiohttp.org/en/stable/web_reference.html#aiohttp.web.AppRunner): a request
    aiohttp could not parse (an ``HttpProcessingError``: ``LineTooLong``, a duplicate
    ``Host``, not HTTP at all) is one line at ``INFO`` at most, naming the error's class,
    never its message (which quotes the request: escape codes, 8 KB of URL); anything
    else (a handler's error) is logged as aiohttp logs it, traceback and all."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        """``msg`` at ``level``, or one line for a request that could not be parsed."""
        failure = kwargs.get("exc_info")
        if isinstance(failure, HttpProcessingError):
            self.logger.log(
                min(level, logging.INFO),
                f"{msg}: a bad HTTP request (%s), answered %s",
                *args,
                type(failure).__name__,
                failure.code,
            )
            return
        super().log(level, msg, *args, **kwargs)
