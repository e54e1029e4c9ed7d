"""The import arrows of DESIGN.md, checked on every module's AST.

bot -> adapters -> conversations -> core, and core knows no platform, HTTP
framework or SQL library.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = {"slack_bolt", "slack_sdk", "discord"}
HTTP = {"aiohttp", "httpx", "fastapi", "starlette", "flask"}
SQL = {"sqlalchemy", "aiosqlite", "alembic", "sqlite3"}

FORBIDDEN = {
    "core": {"bot", "adapters", "conversations"} | PLATFORMS | HTTP | SQL,
    "conversations": {"bot", "adapters"} | PLATFORMS | HTTP,
    "adapters": {"bot", "core"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_point_one_way(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    wrong = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[package])
        for path in files
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("import sqlalchemy\nfrom conversations.store import Store\n")
    assert {"sqlalchemy", "conversations"} <= imported_roots(module)
