"""The declarative base of every table of the store (:mod:`conversations.store.schema`,
:mod:`conversations.store.governance_schema`): times are timezone-aware UTC, JSON columns
hold pydantic dumps."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    """Declarative base of every table."""

    type_annotation_map = {dict[str, Any]: JSON, datetime: DateTime(timezone=True)}  # noqa: RUF012
