"""Large tool outputs (issue 16, acceptance 1): a preview with an id, and read_output.

A 50,000-character tool output reaches the model as its head and tail with a line
naming the output's id; the whole output is in the store, and ``read_output``
pages through it, also after a restart of the bot (the run waits for a person in
between, holding nothing). Pages are exact slices of the output.
"""

from __future__ import annotations

import re

from bot.app import build
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.outputs import NOTE_ROOM
from core.vocabulary.lifecycle import Lifecycle
from tests.harness import Chat

BIG = "".join(f"{n:05d}|" for n in range(8_334))[:50_000]
"""50,000 characters, every stretch of it different."""
LIMIT = 16_000
"""The default ``output_limit``: characters of a tool output the model reads."""


def result_of(model: ScriptedModel, request: int) -> str:
    """The text of the (one) tool result in the newest message of request ``request``."""
    (block,) = [
        b for b in model.requests[request].messages[-1]["content"] if b["type"] == "tool_result"
    ]
    content = block["content"]
    return content if isinstance(content, str) else content[0]["text"]


async def test_a_long_output_is_previewed_with_an_id_and_read_in_pages_after_a_restart(
    sqlite_settings: Settings,
) -> None:
    first = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Read it"]})]),
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "big.txt", "content": BIG})]),
            ScriptedTurn(calls=[ScriptedCall("read_file", {"path": "big.txt"})]),
            ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Read on?"})]),
        ]
    )
    app = await build(sqlite_settings, model=first)
    await app.start()
    chat = Chat(app)
    await chat.mention("read big.txt")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    assert str((await chat.snapshot()).status) == "waiting(question)"
    await app.close()

    preview = result_of(first, 3)
    found = re.search(r'read_output\(id="(out_[0-9a-f]{12})", offset=(\d+)\)', preview)
    assert found, preview
    output_id, offset = found[1], int(found[2])
    keep = (LIMIT - NOTE_ROOM) // 2
    assert len(preview) <= LIMIT
    assert preview.startswith(BIG[:keep]) and preview.endswith(BIG[-keep:])
    assert f"The whole output is {output_id} (50,000 characters)" in preview
    assert offset == keep

    second = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("read_output", {"id": output_id, "offset": offset})]),
            ScriptedTurn(calls=[ScriptedCall("read_output", {"id": output_id, "offset": 39_550})]),
            ScriptedTurn(calls=[ScriptedCall("read_output", {"id": "out_000000000000"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Read it all."})]),
        ]
    )
    app = await build(sqlite_settings, model=second)  # a restart while the run waits
    await app.start()
    thread, chat = chat.thread, Chat(app)
    chat.thread = thread
    await chat.reply("yes")
    await app.hub.settled()
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
    await app.close()

    page = LIMIT - NOTE_ROOM
    assert result_of(second, 1) == (
        f"{BIG[offset : offset + page]}\n[characters {offset:,} to {offset + page:,} of "
        f'50,000; next: read_output(id="{output_id}", offset={offset + page})]'
    )
    assert result_of(second, 2) == (
        f"{BIG[39_550:]}\n[characters 39,550 to 50,000 of 50,000; that is the end]"
    )
    assert result_of(second, 3) == "there is no output 'out_000000000000' in this conversation"
