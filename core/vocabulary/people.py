"""People in a conversation, as the core knows them: a stable id and a display name."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Person(BaseModel):
    """Someone in the conversation: a stable platform user id and a display name."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
