"""Files people share in the thread, as the model reads them.

The hub fetches a message's files through the platform's adapter and hands them over
in a :class:`core.vocabulary.inputs.ThreadMessage` (``files``: name, media type,
bytes, or why there are none); core never learns where they came from. Before
the engine journals the message, :meth:`FileReader.read` turns each file into
Messages API content blocks, which the journal keeps as they were sent
(:attr:`core.vocabulary.entries.UserText.files`) and the history sends before the person's words
(:func:`core.run.history.user_blocks`):

- a PNG, JPEG, GIF or WebP image (told by its bytes, :mod:`core.files.images`) is a
  label and an image block, within the API's limits (:mod:`core.files.blocks`);
- a text or code file (:mod:`core.files.kinds`) is inlined as a text block while the
  message's inlined text stays within ``text_limit`` characters;
- anything else, a text past the limit and an image past the API's limits are saved
  into the conversation's workspace (:mod:`core.files.saving`) with a note saying
  where, and described by name, type and size;
- a file the hub could not fetch is a note saying why.

Reading is done once, when the message arrives; a resume reads the blocks from the
journal and sends the same bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from core.files.blocks import (
    Block,
    ImageBudget,
    image_block,
    inline_text,
    saved_note,
    text_block,
)
from core.files.images import image_info
from core.files.kinds import as_text, looks_like_text, media_type_of, shown_name, size_said
from core.files.saving import save_shared
from core.secrets import NO_SECRETS, Redactor
from core.tools.workspaces import GitWorkspaces, Workspaces
from core.vocabulary.errors import ToolError
from core.vocabulary.inputs import SharedFile, ThreadMessage
from core.vocabulary.snapshot import ConversationSnapshot

__all__ = ["FileReader"]

_Save = Callable[[str, bytes], Awaitable[str]]
"""Saves ``data`` under ``name`` in the workspace; returns its path relative to it."""


class FileReader:
    """Reads the files shared with a message into the content blocks the model reads.

    ``workspaces`` prepares the workspace before a file is saved there (a clone is
    made first, as before a tool's first call). ``redactor`` takes the bot's secrets
    out of the message's words and of inlined text before they are journaled (a
    person who pastes a log with the API key in it does not store the key).
    """

    def __init__(
        self, *, workspaces: Workspaces | None = None, redactor: Redactor = NO_SECRETS
    ) -> None:
        self._workspaces: Workspaces = workspaces or GitWorkspaces()
        self._redactor = redactor

    async def read(
        self,
        snap: ConversationSnapshot,
        message: ThreadMessage,
        *,
        text_limit: int = 50_000,
        repo: str | None = None,
    ) -> ThreadMessage:
        """``message`` with its ``files`` read into ``blocks`` (and ``files`` emptied), and
        the bot's secrets taken out of its words and inlined text.

        ``snap``: the conversation the message is for (its workspace, and the images
        its journal already shows). ``text_limit``: characters of text files inlined
        per message (the settings' ``file_text_limit``); ``repo``: the repository the
        workspace is cloned from (the settings' ``git_repo``). A message without files
        is returned as it is. Never raises for a file: one that cannot be saved is
        described with the reason.
        """
        text = self._redactor.redact(message.text)
        if not message.files:
            return message if text == message.text else message.model_copy(update={"text": text})
        save = self._saver(snap, repo)
        reading = _Reading(snap=snap, text_left=text_limit, text_limit=text_limit, save=save)
        blocks: list[Block] = []
        for file in message.files:
            blocks += await reading.blocks(message.author.name, file)
        blocks = [self._redacted(block) for block in blocks]
        return message.model_copy(
            update={"text": text, "files": (), "blocks": (*message.blocks, *blocks)}
        )

    def _redacted(self, block: Block) -> Block:
        if block.get("type") != "text":
            return block
        return {**block, "text": self._redactor.redact(block["text"])}

    def _saver(self, snap: ConversationSnapshot, repo: str | None) -> _Save:
        prepared = False

        async def save(name: str, data: bytes) -> str:
            nonlocal prepared
            workspace = Path(snap.workspace)
            if not prepared:
                await self._workspaces.prepare(snap.id, workspace, repo)
                prepared = True
            return await asyncio.to_thread(save_shared, workspace, name, data)

        return save


class _Reading:
    """One message's files being read: the images its conversation shows, the inline
    text it has left."""

    def __init__(
        self, *, snap: ConversationSnapshot, text_left: int, text_limit: int, save: _Save
    ) -> None:
        self._images = ImageBudget.of(snap.journal)
        self._text_left = text_left
        self._text_limit = text_limit
        self._save = save

    async def blocks(self, author: str, file: SharedFile) -> Sequence[Block]:
        """The blocks of ``file``, shared by ``author``."""
        name = shown_name(file.name)
        media_type = media_type_of(file.media_type)
        if file.data is None:
            label = f"{author} shared {name} ({media_type}, {size_said(file.size)})"
            return [text_block(f"[{label}; {file.problem or 'it was not fetched'}]")]
        data = file.data
        info = image_info(data)
        if info is not None:
            label = (
                f"{author} shared {name} ({info.media_type}, {size_said(len(data))}, "
                f"{info.width}x{info.height} px)"
            )
            why = self._images.refusal(info, data)
            if why is None:
                self._images.take(data)
                return [text_block(f"[{label}]"), image_block(info, data)]
            return [await self._saved(label, why, file.name, data)]
        text = as_text(data) if looks_like_text(file.name, media_type) else None
        if text is None:
            label = f"{author} shared {name} ({media_type}, {size_said(len(data))})"
            return [await self._saved(label, None, file.name, data)]
        label = f"{author} shared {name} ({media_type}, {len(text):,} characters)"
        if len(text) <= self._text_left:
            self._text_left -= len(text)
            return [text_block(inline_text(label, name, text))]
        why = f"too long to show inline ({self._text_limit:,} characters a message)"
        return [await self._saved(label, why, file.name, data)]

    async def _saved(self, label: str, why: str | None, name: str, data: bytes) -> Block:
        try:
            path = await self._save(name, data)
        except (OSError, ToolError) as exc:
            return text_block(saved_note(label, why, None, str(exc) or type(exc).__name__))
        return text_block(saved_note(label, why, path, None))
