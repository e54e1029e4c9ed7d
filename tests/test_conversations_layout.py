"""The rooms of ``conversations/`` stay small, and its consumers of the store name no backend.

Checked on the source: no module of ``conversations/`` past 400 lines; the hub, the
deliverer, the sweeper, the stopper and the leases holder import the store's
interfaces (:mod:`conversations.store.interfaces`), never a backend (the SQL or
in-memory store), its tables or SQLAlchemy; and each backend implements every
interface (mypy checks the signatures, since ``open_store`` returns either as a
``Store``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conversations.render import render_event
from conversations.store import interfaces
from conversations.store.memory import MemoryStore
from conversations.store.sql import SqlStore, create_engine
from tests.test_store_contract import INTERFACES

ROOT = Path(__file__).resolve().parents[1]
CONVERSATIONS = ROOT / "conversations"
MAX_LINES = 400
CONSUMERS = (
    "conversations/hub",
    "conversations/outbox",
    "conversations/sweeper.py",
    "conversations/stopping.py",
    "conversations/store/leases.py",
    "conversations/slots.py",
)
BACKENDS = (
    "conversations.store.sql",
    "conversations.store.memory",
    "conversations.store.backends",
    "conversations.store.schema",
    "sqlalchemy",
)


def test_no_module_of_conversations_is_past_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted(CONVERSATIONS.rglob("*.py"))
        if "migrations" not in path.parts
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_the_store_s_consumers_import_no_backend(consumer: str) -> None:
    where = ROOT / consumer
    files = sorted(where.rglob("*.py")) if where.is_dir() else [where]
    assert files
    wrong = {
        str(path.relative_to(ROOT)): sorted(
            name for name in _imports(path) if name.startswith(BACKENDS)
        )
        for path in files
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_the_checker_sees_a_backend_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("from conversations.store.sql import SqlStore\nimport sqlalchemy\n")
    assert {"conversations.store.sql.SqlStore", "sqlalchemy"} <= _imports(module)


def _stores() -> list[object]:
    """One store of each backend, not opened (nothing is read or written)."""
    engine = create_engine("sqlite+aiosqlite:///:memory:")  # connects only when used
    return [SqlStore(engine=engine, render=render_event), MemoryStore(render=render_event)]


@pytest.mark.parametrize("store", _stores(), ids=["sql", "memory"])
def test_each_backend_hands_out_every_interface(store: object) -> None:
    protocols = INTERFACES  # the contract suite's map of the parts
    parts = {n for n, v in vars(interfaces.Store).items() if isinstance(v, property)}
    assert parts == set(protocols)
    for part, protocol in protocols.items():
        wanted = {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
        missing = wanted - set(dir(getattr(store, part)))
        assert missing == set(), (type(store).__name__, part)
