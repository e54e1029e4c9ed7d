"""The one log line for a payload that gives no event, and how a payload's value is shown.

Every inbound translator that returns None says so once, through the platform's
:class:`DropLog`: ``dropped Slack app_mention slack:T1:C1:1.2: <why>`` (or ``no key``
where the payload has no delivery key). A payload missing a field it needs, or
holding one of the wrong type, is *malformed* and logged at WARNING; one left out
on purpose (the bot's own echo, an edit, another bot, a system message) at DEBUG.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Never

LABEL_LIMIT = 80
"""Characters of a payload's own value kept in a log line (a fuzzer sends megabytes)."""


def label(value: object) -> str:
    """``value`` for a log line: a string cut to :data:`LABEL_LIMIT` characters, else its type.

    ``label("app_mention")`` is ``app_mention``; ``label(None)`` is ``<NoneType>``.
    """
    if isinstance(value, str):
        return value if len(value) <= LABEL_LIMIT else f"{value[:LABEL_LIMIT]}..."
    return f"<{type(value).__name__}>"


@dataclass(frozen=True)
class DropLog:
    """Logs the payloads a platform's translators drop: ``dropped {platform} {kind} {key}: {why}``.

    ``platform`` is the name in the line (``Slack``), ``logger`` where it goes (the
    translators' logger, so ``adapters.slack.translate`` keeps its records).
    """

    platform: str
    logger: logging.Logger

    def __call__(
        self, kind: str, key: str | None, why: str, *, malformed: bool = False
    ) -> Never | None:  # noqa: RUF020
        """Log one dropped payload; returns None, for ``return dropped(...)``.

        ``kind`` is the payload type (an event or dispatch name), ``key`` its
        delivery key when it has one. (``Never | None`` is None to a reader; it lets
        mypy accept ``return dropped(...)`` in a translator.)
        """
        level = logging.WARNING if malformed else logging.DEBUG
        shown = label(key) if key else "no key"
        self.logger.log(level, "dropped %s %s %s: %s", self.platform, kind, shown, why)
        return None
