"""The answer's preview: ``finish``'s ``answer`` read from the model's tool-input deltas as
they come, and told to the engine's preview (docs/architecture.md "Streamed answers")."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.models.anthropic import anthropic_model_from
from core.models.base import Model, ModelEvent, ModelRequest, ToolInputDelta
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, canned_events
from core.run.engine import Engine
from core.run.preview import AnswerPieces, partial_answer
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.vocabulary import lifecycle
from core.vocabulary.entries import UserText
from core.vocabulary.errors import ModelError
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from tests.fakes.anthropic_server import FakeAnthropicServer, text, tool_use

ALICE = Person(id="U0ALICE001", name="alice")
ANSWER = 'The fixture was shared: "one session" per test fixes it.\nTen runs pass ✅.'


class Recorded:
    """An :class:`core.run.preview.AnswerPreview` that keeps what it was told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str, str | bool]] = []

    def wrote(self, conversation_id: str, text: str) -> None:
        self.told.append(("wrote", conversation_id, text))

    def grew(self, conversation_id: str, text: str) -> None:
        self.told.append(("grew", conversation_id, text))

    def ended(self, conversation_id: str, whole: bool) -> None:
        self.told.append(("ended", conversation_id, whole))

    def texts(self) -> list[str]:
        return [str(t) for kind, _, t in self.told if kind == "grew"]


@pytest.mark.parametrize("cut", range(1, 12))
def test_the_answer_is_read_from_every_prefix_of_its_json(cut: int) -> None:
    written = json.dumps({"note": {"a": [1, "}"]}, "answer": ANSWER, "after": 2})
    seen = [partial_answer(written[:end]) for end in range(0, len(written) + 1, cut)]
    seen.append(partial_answer(written))
    grown = [s for s in seen if s is not None]
    assert grown[-1] == ANSWER
    assert all(ANSWER.startswith(s) for s in grown)  # a cut escape never shows half
    assert all(len(a) <= len(b) for a, b in itertools.pairwise(grown))


def test_no_answer_is_read_before_its_string_begins_or_from_another_shape() -> None:
    assert partial_answer("") is None
    assert partial_answer('{"answer"') is None
    assert partial_answer('{"answer": ') is None
    assert partial_answer('{"answer": "') == ""
    assert partial_answer('{"answer": 3}') is None
    assert partial_answer('{"other": "answer: x"}') is None
    assert partial_answer('{"answer": "caf\\u00') == "caf"
    assert partial_answer('{"answer": "caf\\u00e9"') == "café"
    assert partial_answer('{"answer": "\\ud83d\\ude00!"') == "😀!"


def test_only_a_finish_calls_input_grows_the_answer() -> None:
    pieces = AnswerPieces()
    assert pieces.add("t1", "run_command", '{"answer": "no"}') is None
    assert pieces.add("t2", "finish", '{"answer": "Do') == "Do"
    assert pieces.add("t2", "finish", "") is None  # nothing new: nothing told
    assert pieces.add("t2", "finish", 'ne."}') == "Done."
    assert pieces.shown == "Done."


async def _conversation(store: MemoryStore, tmp_path: Path) -> str:
    cid = await store.threads.open_conversation(
        delivery_key="k1",
        binding=PlatformRef(platform="console", channel="c", thread="t1"),
        requester=ALICE,
        workspace_root=tmp_path,
        position="executing",
    )
    assert cid is not None
    await store.journal.commit(
        cid,
        Change(
            entries=(UserText(author=ALICE, text="why do the tests fail?", role="request"),),
            status=lifecycle.RUNNING,
            position="executing",
        ),
    )
    return cid


async def _run(model: Model, tmp_path: Path) -> tuple[str, Recorded, MemoryStore]:
    store = MemoryStore(render=render_event)
    cid = await _conversation(store, tmp_path)
    preview = Recorded()
    engine = Engine(
        journal=store.journal, model=model, toolbox=Toolbox(control_tools()), preview=preview
    )
    await engine.run(cid)
    return cid, preview, store


async def test_a_scripted_finish_grows_the_preview_piece_by_piece(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(text="Looking.", calls=[ScriptedCall("list_files", {"path": "."})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": ANSWER})], chunk=7),
        ]
    )
    cid, preview, store = await _run(model, tmp_path)

    texts = preview.texts()
    assert len(texts) > 5 and texts[-1] == ANSWER
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(texts))
    assert preview.told[-1] == ("ended", cid, True)
    assert {c for _, c, _ in preview.told} == {cid}
    snap = await store.journal.load(cid)
    assert snap.status == lifecycle.DONE  # the answer itself is the run's, as before


async def test_the_real_clients_input_deltas_reach_the_preview(tmp_path: Path) -> None:
    server = FakeAnthropicServer()
    await server.start()
    try:
        server.add([text("Reading."), tool_use("toolu_01", "finish", {"answer": ANSWER})])
        model = anthropic_model_from("test-key", server.base_url, "claude-test-1", max_retries=0)
        cid, preview, _store = await _run(model, tmp_path)
    finally:
        await server.stop()

    texts = preview.texts()
    assert len(texts) >= 2 and texts[-1] == ANSWER  # the fake cuts the JSON in pieces
    assert preview.told[-1] == ("ended", cid, True)


class BreaksOff:
    """A model whose first response breaks off half way through its answer's JSON, then
    answers whole (a retry from the journal)."""

    name = "breaks-off"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        yield ToolInputDelta(index=0, id="t1", name="finish", partial_json='{"answer": "Half')
        if self.calls == 1:
            raise ModelError("The connection to the model API broke off", retryable=True)
        async for event in canned_events(
            self.name, "b", request, "", [ScriptedCall("finish", {"answer": "Half done."})]
        ):
            yield event


async def test_a_response_that_breaks_off_ends_its_preview_unanswered(tmp_path: Path) -> None:
    store = MemoryStore(render=render_event)
    cid = await _conversation(store, tmp_path)
    preview = Recorded()
    model = BreaksOff()
    engine = Engine(
        journal=store.journal, model=model, toolbox=Toolbox(control_tools()), preview=preview
    )
    await engine.run(cid)

    assert ("ended", cid, False) in preview.told  # the broken response: closed as it is
    assert ("grew", cid, "Half") in preview.told


async def test_a_finish_beside_other_calls_is_the_answer(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                calls=[ScriptedCall("finish", {"answer": "Soon."}), ScriptedCall("list_files")]
            )
        ]
    )
    cid, preview, _store = await _run(model, tmp_path)

    assert preview.told[-1] == ("ended", cid, True)
    assert preview.texts()[-1] == "Soon."
