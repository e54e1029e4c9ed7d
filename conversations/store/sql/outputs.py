"""The SQL ``OutputStore`` (:class:`core.outputs.OutputStore`): the ``tool_outputs`` table."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from conversations.store.schema import ToolOutputRow
from conversations.store.sql.database import Database


class SqlOutputs:
    """Large tool outputs kept whole, one row each."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def put_output(self, conversation_id: str, output_id: str, content: str) -> None:
        """Keep ``content`` under the new ``output_id`` (one write transaction)."""

        def write(session: Session) -> None:
            session.add(
                ToolOutputRow(id=output_id, conversation_id=conversation_id, content=content)
            )

        await self._db.write(write)

    async def get_output(self, conversation_id: str, output_id: str) -> str | None:
        """The content of ``output_id`` if it is ``conversation_id``'s, else None."""
        stmt = select(ToolOutputRow.content).where(
            ToolOutputRow.id == output_id, ToolOutputRow.conversation_id == conversation_id
        )
        async with self._db.read() as session:
            return (await session.execute(stmt)).scalar_one_or_none()
