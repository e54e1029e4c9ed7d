"""A conversation run by engines on one memory store, killed in place and resumed.

:class:`Setup` opens one conversation on a :class:`MemoryStore` and builds engines
over it, each with a model that plays a script file from the history
(:class:`Recording`, which keeps the requests it answered) and a run context whose
``sleep`` records the delays instead of waiting. With :func:`die_in_place`, a fault
point (``THREADBOT_FAULT``'s, :mod:`core.faults`) raises :class:`Killed` instead of
killing the test's process: the engine "died" there, and a new engine over the same
store goes on, as a restarted process would (docs/architecture.md, "Test seams").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import core.faults
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.context import CountingIds, ManualClock, RunContext
from core.faults import NO_FAULTS, Faults
from core.models.base import ModelEvent, ModelRequest
from core.models.scripted import ScriptFileModel
from core.retry import RetryPolicy
from core.run.engine import Engine
from core.run.settings import EngineSettings
from core.tools.base import Tool, Toolbox
from core.tools.control import control_tools
from core.tools.workspace import ListFiles
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.journal import Change, Committed
from core.vocabulary.people import Person
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows import default_workflow
from tests.flaky_bot import FlakyRead, FlakyWrite

ALICE = Person(id="U0ALICE001", name="alice")


class Killed(BaseException):
    """The process "died" at a fault point (raised in place of SIGKILL)."""


@pytest.fixture
def die_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault points raise :class:`Killed` instead of killing the test's process."""

    def kill(pid: int, sig: int) -> None:
        raise Killed(sig)

    monkeypatch.setattr(core.faults, "os", SimpleNamespace(kill=kill, getpid=lambda: 0))


class Recording:
    """A model script file (:class:`ScriptFileModel`: a restarted engine goes on where
    the history is) that records the requests it answers."""

    def __init__(self, path: Path) -> None:
        self._model = ScriptFileModel(str(path))
        self.name = self._model.name
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        async for event in self._model.stream(request):
            yield event


class Setup:
    """One conversation on a memory store; engines over it, each with its own model and
    a ``sleep`` that records the delays. ``policy``: the retry policy of the engines'
    settings; ``tools``: their tools besides the control tools (by default the flaky
    tools and ``list_files``); ``options``: more of :class:`Engine`'s arguments
    (``compose``, ``outputs``, ``settings``...)."""

    def __init__(
        self,
        tmp_path: Path,
        policy: RetryPolicy,
        script: list[dict[str, Any]],
        *,
        tools: list[Tool] | None = None,
        **options: Any,
    ) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.tools = tools if tools is not None else [FlakyRead(), FlakyWrite(), ListFiles()]
        self.options = options
        self.tmp_path = tmp_path
        self.store = MemoryStore(render=render_event)
        self.policy = policy
        self.script = tmp_path / "script.json"
        self.script.write_text(json.dumps(script))
        self.sleeps: list[float] = []
        self.models: list[Recording] = []
        self.commits: list[tuple[str, ...]] = []
        """The kinds of the entries of each commit, in order."""
        self.cid = ""

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        return await self.store.journal.load(conversation_id)

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        committed = await self.store.journal.commit(conversation_id, change, after_seq=after_seq)
        self.commits.append(tuple(e.kind for e in change.entries))
        return committed

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def engine(self, faults: Faults = NO_FAULTS) -> Engine:
        model = Recording(self.script)
        self.models.append(model)
        options: dict[str, Any] = {
            "settings": EngineSettings(tool_retry=self.policy),
            "context": RunContext(clock=ManualClock(), ids=CountingIds("req"), sleep=self._sleep),
            **self.options,
        }
        return Engine(
            journal=self,
            model=model,
            toolbox=Toolbox([*control_tools(), *self.tools]),
            faults=faults,
            **options,
        )

    async def mention(self, engine: Engine, text: str = "check it") -> None:
        cid = await self.store.threads.open_conversation(
            delivery_key="m-1",
            binding=PlatformRef(platform="console", channel="console", thread="m-1"),
            requester=ALICE,
            workspace_root=self.tmp_path / "workspaces",
            position=default_workflow().start,
        )
        assert cid is not None
        self.cid = cid
        await engine.start(cid, ThreadMessage(text=text, author=ALICE))

    async def snapshot(self) -> ConversationSnapshot:
        return await self.store.journal.load(self.cid)

    @property
    def requests(self) -> list[ModelRequest]:
        return [r for m in self.models for r in m.requests]
