"""The in-memory ``OutputStore`` (:class:`core.outputs.OutputStore`)."""

from __future__ import annotations

from conversations.store.memory._tables import Tables, checkpoint


class MemoryOutputs:
    """Large tool outputs kept whole, by conversation and id."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def put_output(self, conversation_id: str, output_id: str, content: str) -> None:
        """Keep ``content`` under the new ``output_id``; raises for an unknown conversation."""
        await checkpoint()
        self._t.conversation(conversation_id)  # ConversationNotFound, as a foreign key
        self._t.outputs[(conversation_id, output_id)] = content

    async def get_output(self, conversation_id: str, output_id: str) -> str | None:
        """The content of ``output_id`` if it is ``conversation_id``'s, else None."""
        await checkpoint()
        return self._t.outputs.get((conversation_id, output_id))
