"""Tools that fail their first calls, and a bot process that has them, for retry tests.

:class:`FlakyRead` (read-only) and :class:`FlakyWrite` (mutating) fail the first
``fails`` calls made with the same ``counter`` and then succeed. The count is kept
in a file of the conversation's workspace (``<counter>.count``), so it survives a
killed process: a restarted bot goes on counting where the dead one stopped. ``how``
chooses the failure: ``retryable`` (a :class:`ToolError` marked retryable),
``crash`` (an exception) or ``refusal`` (a :class:`ToolError` not marked).

``python -m tests.flaky_bot console`` is ``python -m bot console`` with both tools
in its toolbox (:func:`bot.engines.default_toolbox` wrapped), for
:class:`tests.console_process.Bot` runs killed with ``THREADBOT_FAULT``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from core.models.base import ToolKind, ToolSpec
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.vocabulary.errors import ToolError

SCHEMA = {
    "type": "object",
    "properties": {
        "fails": {"type": "integer"},
        "counter": {"type": "string"},
        "how": {"enum": ["retryable", "crash", "refusal"]},
    },
    "required": ["fails", "counter"],
}


class FlakyRead:
    """A read-only tool that fails its first ``fails`` calls per ``counter``."""

    kind = ToolKind.READ_ONLY
    name = "flaky_read"

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description="Fails its first calls, then answers.",
            input_schema=SCHEMA,
            kind=self.kind,
        )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        counter = ctx.workspace / f"{args['counter']}.count"
        tries = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(tries))
        if tries <= int(args["fails"]):
            how = args.get("how", "retryable")
            if how == "crash":
                raise RuntimeError(f"flaky crash {tries}")
            raise ToolError(f"flaky failure {tries}", retryable=how == "retryable")
        return ToolOutput(content=f"ok on try {tries}", note=f"{self.name} ok on try {tries}")


class FlakyWrite(FlakyRead):
    """The same, a mutating tool."""

    kind = ToolKind.MUTATING
    name = "flaky_write"


def main() -> int:
    """``threadbot`` with the flaky tools in its toolbox."""
    import bot.engines
    from bot.cli import main as threadbot

    default_toolbox = bot.engines.default_toolbox

    def with_flaky(*args: Any, **kwargs: Any) -> Toolbox:
        return Toolbox([*default_toolbox(*args, **kwargs), FlakyRead(), FlakyWrite()])

    bot.engines.default_toolbox = with_flaky  # type: ignore[assignment]
    return threadbot()


if __name__ == "__main__":
    sys.exit(main())
