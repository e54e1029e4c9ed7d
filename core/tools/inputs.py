"""A tool's input as a pydantic model: its JSON schema is what the model sees, its
validation what the tool reads.

A tool declares its input once, as a :class:`ToolInput` (fields with their types,
bounds and descriptions); :meth:`ToolInput.json_schema` generates the schema of its
:class:`core.models.base.ToolSpec` and :meth:`ToolInput.parse` reads the model's
arguments into it, the way pydantic-ai builds a tool's schema from its function's
signature. Validation is strict (``"5"`` is no integer, ``true`` no number), unknown
fields are left out, and a refusal names the field in words the model reads
(``\\`path\\` must be a string, got int``), raised as
:class:`core.vocabulary.errors.ToolError`.

The schema is generated the same way every time, so the tools the model sees, part of
the cached prefix of every request, are the same bytes on every request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from core.vocabulary.errors import ToolError

_KINDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "list_type": "a list",
    "bool_type": "true or false",
}


class _PlainSchema(GenerateJsonSchema):
    """JSON Schema as a tool's input reads: no titles, an optional field as its type
    (absent, not null), no ``null`` default."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        generated = super().default_schema(schema)
        if generated.get("default", ...) is None:
            generated.pop("default")
        return generated

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


class ToolInput(BaseModel):
    """The input of one tool; subclasses declare its fields."""

    model_config = ConfigDict(frozen=True, strict=True, extra="ignore")

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The input's JSON Schema: an object of the fields, no other property."""
        schema = cls.model_json_schema(schema_generator=_PlainSchema)
        schema.pop("title", None)
        schema.pop("description", None)  # the class's docstring is for its readers
        schema.setdefault("required", [])
        return {**schema, "additionalProperties": False}

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> Self:
        """``args`` (the model's JSON object) read as this input.

        Raises :class:`ToolError` naming the first field that is missing or wrong.
        """
        try:
            return cls.model_validate(dict(args))
        except ValidationError as exc:
            raise ToolError(_said(exc.errors()[0])) from exc


def _said(error: Any) -> str:
    """One validation error in the words the model reads."""
    field = ".".join(str(part) for part in error["loc"]) or "input"
    kind = error["type"]
    if kind == "missing":
        return f"`{field}` is required"
    if kind in _KINDS:
        return f"`{field}` must be {_KINDS[kind]}, got {type(error['input']).__name__}"
    if kind == "greater_than_equal":
        return f"`{field}` must be at least {error['ctx']['ge']}"
    if kind == "greater_than":
        return f"`{field}` must be more than {error['ctx']['gt']}"
    if kind == "value_error":  # a validator's own words, which name the field
        return str(error["ctx"]["error"])
    return f"`{field}`: {error['msg']}"
