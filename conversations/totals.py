"""A request's totals as a person reads them: the answer's footer, its branch line and
the ``status`` mode's status line (docs/architecture.md, "What a person sees")::

    🌿 `threadbot/c1` · changed: `a.py`
    — 9 tool calls · 2m 40s · 31.5k tokens (89% from cache) · $0.07
    — planner claude-opus-5-5: 2 model calls, $0.05 · executor claude-haiku-5: 7 model calls, $0.02

Pure functions of :class:`core.vocabulary.run_events.RunStats`.
"""

from __future__ import annotations

from core.pricing import dollars
from core.run.stats import duration_said
from core.vocabulary.run_events import RunStats

MAX_FILES_SHOWN = 20
"""Changed files named in an answer; more are counted."""


def branch_line(stats: RunStats) -> str:
    """``🌿 threadbot/c1 · changed: a.py, b.py`` and a newline, or "" without a clone."""
    if stats.branch is None:
        return ""
    files = stats.changed_files
    if not files:
        return f"🌿 `{code_text(stats.branch)}` · no files changed\n"
    shown = ", ".join(f"`{code_text(f)}`" for f in files[:MAX_FILES_SHOWN])
    more = f" and {len(files) - MAX_FILES_SHOWN} more" if len(files) > MAX_FILES_SHOWN else ""
    return f"🌿 `{code_text(stats.branch)}` · changed: {shown}{more}\n"


def code_text(name: str) -> str:
    """A file or branch name as code text: no backtick, ``<``, ``>`` or line break, so
    a name a command chose cannot end the code span or ping (``<!channel>``)."""
    return "".join("?" if c in "`<>\r\n" else c for c in name)


def format_stats(stats: RunStats) -> str:
    """``9 tool calls · 2m 40s · 31.5k tokens (89% from cache) · $0.07``.

    The share is of the input tokens read from the prompt cache; the cost is left
    out when no call had a price.
    """
    tokens = stats.input_tokens + stats.output_tokens
    text = f"{calls_said(stats.tool_calls)} · {duration_said(stats.seconds)}"
    text += f" · {count_said(tokens)} tokens"
    if stats.cache_read_tokens and stats.input_tokens:
        share = stats.cache_read_tokens * 100 // stats.input_tokens
        text += f" ({share}% from cache)"
    if stats.cost_micro_usd is not None:
        text += f" · {dollars(stats.cost_micro_usd)}"
    return text


def roles_line(stats: RunStats) -> str:
    """``\n— planner claude-opus-5-5: 2 model calls, $0.05 · executor claude-haiku-5: 7
    model calls, $0.02``: each role's models, calls and cost (none for a role whose
    calls had no price), when more than one role was asked and not all with one model;
    "" otherwise (one model for every role: the line above says it all)."""
    models = {model for role in stats.roles for model in role.models}
    if len(stats.roles) < 2 or len(models) < 2:
        return ""
    parts = []
    for role in stats.roles:
        calls = f"{role.calls} model call" + ("" if role.calls == 1 else "s")
        cost = "" if role.cost_micro_usd is None else f", {dollars(role.cost_micro_usd)}"
        parts.append(f"{role.role} {'/'.join(role.models)}: {calls}{cost}")
    return "\n— " + " · ".join(parts)


def calls_said(n: int) -> str:
    """``1 tool call``, ``9 tool calls``."""
    return f"{n} tool call" + ("" if n == 1 else "s")


def count_said(n: int) -> str:
    """``950``, ``31.5k``, ``2.4M``, ``3.6B``."""
    for size, unit in ((10**9, "B"), (10**6, "M"), (10**3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)
