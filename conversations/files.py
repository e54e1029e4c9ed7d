"""Fetching the files shared with a message, within the caps, for the engine.

A message's :attr:`~conversations.events.MessagePosted.attachments` are references;
the platform's adapter fetches them (a :class:`FileFetcher`: it knows which hosts may
see which token), and :func:`fetch_shared` turns them into the
:class:`core.vocabulary.inputs.SharedFile` values the engine reads, keeping to
:class:`FileLimits`:

- at most ``per_message`` files of a message are fetched; the rest are left out;
- a file larger than ``max_bytes`` (by the platform's word, or while it is read) is
  not fetched;
- each download may take ``timeout`` seconds.

A file left out by a cap is named in the thread (:func:`caps_notice`) and described to
the model; a failed download is described to the model only (``couldn't fetch it:
HTTP 404``), and loses nothing else of the message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from conversations.errors import FetchFailed, FileTooLarge
from conversations.events import Attachment
from conversations.totals import code_text
from core.files.kinds import size_said
from core.vocabulary.inputs import SharedFile

log = logging.getLogger(__name__)


class FileFetcher(Protocol):
    """Fetches the files shared on one platform (``platform``, as in
    :class:`~conversations.events.PlatformRef`); the adapter implements it."""

    platform: str

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The bytes of ``attachment``.

        Raises :class:`~conversations.errors.FileTooLarge` past ``max_bytes`` bytes and
        :class:`~conversations.errors.FetchFailed` when it cannot be fetched (a host
        the platform's token does not belong to, an HTTP error, a broken connection).
        """
        ...


@dataclass(frozen=True, kw_only=True)
class FileLimits:
    """Caps on what a message may share: ``max_bytes`` per file (bytes),
    ``per_message`` files, ``timeout`` seconds per download."""

    max_bytes: int = 10 * 1024 * 1024
    per_message: int = 10
    timeout: float = 30.0


@dataclass(frozen=True)
class Fetched:
    """A message's files as fetched (in the message's order, every attachment there),
    and those a cap left out: ``too_large`` (each with its size, if known) and
    ``too_many`` (names)."""

    files: tuple[SharedFile, ...]
    too_large: tuple[tuple[str, int | None], ...] = ()
    too_many: tuple[str, ...] = ()


async def fetch_shared(
    attachments: Sequence[Attachment], fetcher: FileFetcher | None, limits: FileLimits
) -> Fetched:
    """Fetch ``attachments`` through ``fetcher`` (concurrently) within ``limits``.

    ``fetcher`` None: the platform fetches no files (each is described as such).
    Never raises for a file: a failure is the file's ``problem``.
    """
    taken = attachments[: limits.per_message]
    fetched = await asyncio.gather(*(_fetch(a, fetcher, limits) for a in taken))
    past = f"not fetched: only the first {limits.per_message} files of a message are read"
    skipped = [_left_out(a, past) for a in attachments[limits.per_message :]]
    return Fetched(
        files=(*(f for f, _ in fetched), *skipped),
        too_large=tuple((f.name, f.size) for f, big in fetched if big),
        too_many=tuple(f.name for f in skipped),
    )


def caps_notice(fetched: Fetched, limits: FileLimits) -> str | None:
    """What the thread is told about the files a cap left out; None when none was. A name
    is code text that cannot end its span or ping (``<!channel>``: :func:`code_text`)."""
    lines = []
    if fetched.too_large:
        named = ", ".join(
            f"`{code_text(name)}` ({size_said(size)})" for name, size in fetched.too_large
        )
        lines.append(f"📎 I can't take {named}: the limit is {size_said(limits.max_bytes)} a file.")
    if fetched.too_many:
        lines.append(
            f"📎 I take the first {limits.per_message} files of a message; "
            f"I left out {', '.join(f'`{code_text(name)}`' for name in fetched.too_many)}."
        )
    return "\n".join(lines) or None


async def _fetch(
    attachment: Attachment, fetcher: FileFetcher | None, limits: FileLimits
) -> tuple[SharedFile, bool]:
    """The file of ``attachment``, and whether it was too large."""
    if not attachment.url:
        return _left_out(attachment, "not fetched: the platform gave no way to fetch it"), False
    if fetcher is None:
        return _left_out(attachment, "not fetched: files can't be fetched from here"), False
    too_large = f"not fetched: larger than the {size_said(limits.max_bytes)} limit a file"
    if attachment.size is not None and attachment.size > limits.max_bytes:
        return _left_out(attachment, too_large), True
    try:
        async with asyncio.timeout(limits.timeout):
            data = await fetcher.fetch(attachment, max_bytes=limits.max_bytes)
    except FileTooLarge:
        return _left_out(attachment, too_large), True
    except FetchFailed as exc:
        log.warning("could not fetch %s (%s): %s", attachment.name, attachment.id, exc)
        return _left_out(attachment, f"couldn't fetch it: {exc}"), False
    except TimeoutError:
        log.warning("fetching %s (%s) timed out", attachment.name, attachment.id)
        return _left_out(attachment, f"couldn't fetch it in {limits.timeout:g} s"), False
    except Exception:  # a fetcher's bug must not lose the rest of the message
        log.exception("fetching %s (%s) failed", attachment.name, attachment.id)
        return _left_out(attachment, "couldn't fetch it: an unexpected error"), False
    if len(data) > limits.max_bytes:  # a fetcher that did not keep to the cap
        return _left_out(attachment, too_large), True
    file = SharedFile(
        name=attachment.name, media_type=attachment.media_type, size=len(data), data=data
    )
    return file, False


def _left_out(attachment: Attachment, problem: str) -> SharedFile:
    return SharedFile(
        name=attachment.name,
        media_type=attachment.media_type,
        size=attachment.size,
        problem=problem,
    )
