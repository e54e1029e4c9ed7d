"""A plan's card as Slack blocks: a ``plan`` block of ``task_card`` blocks, pure.

Shapes from https://docs.slack.dev/reference/block-kit/blocks/plan-block and
https://docs.slack.dev/reference/block-kit/blocks/task-card-block: the plan block has a
``title`` and ``tasks``, each task card a ``task_id``, a ``title`` and a ``status``
(``pending``, ``in_progress``, ``complete``, ``error``). A ``block_id`` is unique in its
message and must change on every ``chat.update`` for Slack to draw the new state, so
each is named after what it shows: a task card ``step_2-in_progress``, the plan block
``plan-v1-<digest of its tasks and note>`` (the same for the same card: a retried edit
sends the same blocks). The buttons go in an ``actions`` block beside the plan block,
the note (the hint, or who decided) in a ``context`` block (docs/architecture.md,
"Plan cards").
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from conversations.events import PlanCard


def plan_blocks(card: PlanCard, escape: Callable[[str], str]) -> list[dict[str, Any]]:
    """The ``plan`` block for ``card``, then a ``context`` block with its note (escaped
    with ``escape``, the sender's mrkdwn escaping) when it has one."""
    tasks = [
        {
            "type": "task_card",
            "block_id": f"step_{n}-{task.status}",
            "task_id": f"step_{n}",
            "title": task.title,
            "status": task.status,
        }
        for n, task in enumerate(card.tasks, start=1)
    ]
    shown = "|".join(f"{t['block_id']}" for t in tasks) + "|" + card.note
    digest = f"{zlib.crc32(shown.encode()):08x}"
    blocks: list[dict[str, Any]] = [
        {
            "type": "plan",
            "block_id": f"plan-v{card.version}-{digest}",
            "title": card.title,
            "tasks": tasks,
        }
    ]
    if card.note:
        blocks.append(
            {
                "type": "context",
                "block_id": f"plan-v{card.version}-ctx-{digest}",
                "elements": [{"type": "mrkdwn", "text": escape(card.note)}],
            }
        )
    return blocks
