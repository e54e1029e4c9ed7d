"""``read_output``: page through a large tool output the model saw only a preview of.

A tool output longer than the run's output limit reaches the model as a head and a
tail with an id between (:mod:`core.outputs`); this tool returns any stretch of the
whole output by character offset, from where the conversation's cache strategy
keeps it (:attr:`core.tools.base.ToolContext.outputs`). An output the strategy kept
once and no longer does (an in-memory one that expired, or was lost to a restart:
:class:`core.outputs.Gone`) is answered in words, not as an error: the model may run
the call that made it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from core.models.base import ToolKind, ToolSpec
from core.outputs import NOTE_ROOM, Gone
from core.tools.base import ToolContext, ToolOutput
from core.tools.inputs import ToolInput
from core.vocabulary.errors import ToolError


class ReadOutputInput(ToolInput):
    """``read_output``: the output's id, and the character to start at."""

    id: str = Field(description="The output's id, out_...")
    offset: int | None = Field(
        0,
        description="The character to start at (0: the beginning).",
        json_schema_extra={"minimum": 0},  # a negative one is refused in words by run()
    )


class ReadOutput:
    """``read_output`` ``{"id": "out_...", "offset": 0}``: a page of a stored output.

    A page is up to the run's output limit less room for its last line, which says
    which characters these are of how many and the offset to read on from. An output
    that is gone (:class:`core.outputs.Gone`) is a normal result that says so and why.
    Raises :class:`ToolError` for an id this conversation has no output under, or an
    offset past the end.
    """

    spec = ToolSpec(
        name="read_output",
        description=(
            "Read a large tool output you saw only the head and tail of, by the id its "
            "preview names (out_...), from a character offset. Each call returns one "
            "page and says the offset of the next."
        ),
        input_schema=ReadOutputInput.json_schema(),
        kind=ToolKind.READ_ONLY,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """The page of output ``args["id"]`` that starts at ``args["offset"]``."""
        given = ReadOutputInput.parse(args)
        output_id, offset = given.id, given.offset or 0
        content = await ctx.outputs(output_id) if ctx.outputs is not None else None
        if content is None:
            raise ToolError(f"there is no output {output_id!r} in this conversation")
        if isinstance(content, Gone):
            return ToolOutput(
                content=(
                    f"The output {output_id} is gone: {content.reason}. Run the call that "
                    "made it again if you still need it."
                ),
                note=f"{output_id} is gone",
            )
        if offset < 0:
            raise ToolError(f"offset {offset} is negative; the output starts at 0")
        if offset > len(content) or (offset == len(content) and content):
            raise ToolError(f"offset {offset} is past the end ({len(content):,} characters)")
        end = min(offset + max(ctx.read_limit - NOTE_ROOM, 1), len(content))
        more = (
            f'next: read_output(id="{output_id}", offset={end})'
            if end < len(content)
            else "that is the end"
        )
        page = (
            f"{content[offset:end]}\n[characters {offset:,} to {end:,} of {len(content):,}; {more}]"
        )
        return ToolOutput(content=page, note=f"read {output_id} from {offset:,}")
