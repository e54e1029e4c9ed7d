"""The persistent cache strategy: whole outputs in the store, as long as the journal.

The default (docs/architecture.md, "Tools and the sandbox"): a restart reads them
back, so ``read_output`` pages on after one exactly as it would have before.
"""

from __future__ import annotations

from core.outputs.base import Gone, OutputStore, new_output_id, preview_text


class PersistentOutputs:
    """The persistent strategy: whole outputs in the store, ids ``out_`` + 12 hex digits."""

    def __init__(self, store: OutputStore) -> None:
        self._store = store

    async def store(self, conversation_id: str, content: str) -> str:
        """Keep ``content``; its new id."""
        output_id = new_output_id()
        await self._store.put_output(conversation_id, output_id, content)
        return output_id

    async def retrieve(self, conversation_id: str, output_id: str) -> str | Gone | None:
        """The content of ``output_id``, or None."""
        return await self._store.get_output(conversation_id, output_id)

    async def preview(self, conversation_id: str, content: str, limit: int) -> tuple[str, str]:
        """Store ``content`` and give its preview and id."""
        output_id = await self.store(conversation_id, content)
        return preview_text(content, output_id, limit), output_id

    def lost(self, conversation_id: str, output_id: str) -> Gone | None:
        """None: the store keeps every output its journal names, so an id it lacks is
        answered as an unknown one."""
        return None
