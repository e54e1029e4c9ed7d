"""The architecture of docs/architecture.md, checked on the source.

The import arrows on every module's AST (docs/architecture.md, "The four packages"):
bot -> adapters -> conversations -> core, and core knows no platform, HTTP framework
or SQL library. Inside each package (docs/architecture.md, "Inside the packages"): no
import circle between its modules nor between its rooms (its direct sub-folders and
modules), core's vocabulary on the ground floor, no run state in a context variable,
the control tools known by name in their own module only, and one writer each of a
tool call's state and of a conversation's lifecycle. And the page itself: the files
of the repository cite it, by its headings, and no notes kept outside the repository.
"""

from __future__ import annotations

import ast
import os
import re
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


# --- inside the packages: no import circle, small modules ----------------------------

MAX_LINES = 400


def module_name(path: Path, root: Path = ROOT) -> str:
    """``core/run/engine.py`` -> ``core.run.engine``; a package's ``__init__`` is the package."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_imports(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The core modules ``path`` imports, wherever the import is (``TYPE_CHECKING`` and
    function bodies too): ``from core.x import y`` counts as ``core.x.y`` when that is a
    module, else as ``core.x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if name in modules:
                    found.add(name)
                elif node.module in modules:
                    found.add(node.module)
    return found - {module_name(path, root)}


def import_graph(package: Path) -> dict[str, set[str]]:
    """``{module: core modules it imports}`` for every module under ``package``."""
    files = sorted(package.rglob("*.py"))
    root = package.parent
    modules = {module_name(path, root) for path in files}
    return {module_name(path, root): core_imports(path, modules, root) for path in files}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph`` (strongly connected parts with more than one
    module, or a module importing itself), each sorted, found by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == module:
                    break
            if len(part) > 1 or module in graph.get(module, ()):
                found.append(sorted(part))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


PACKAGES = ("core", "conversations", "adapters", "bot")


def rooms(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module replaced by its room: the package's direct sub-folder
    or module it is in (``core.run.engine`` -> ``core.run``; ``core`` is its own)."""

    def room(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folded.setdefault(room(module), set()).update(
            room(t) for t in targets if room(t) != room(module)
        )
    return folded


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_among_a_packages_modules(package: str) -> None:
    assert circles(import_graph(ROOT / package)) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_among_a_packages_rooms(package: str) -> None:
    assert circles(rooms(import_graph(ROOT / package))) == []


def test_the_room_finder_sees_a_circle_between_folders() -> None:
    graph = {
        "core.a.x": {"core.b.y"},
        "core.b.y": set(),
        "core.b.z": {"core.a.w"},
        "core.a.w": set(),
    }
    assert circles(graph) == []  # no two files import each other
    assert circles(rooms(graph)) == [["core.a", "core.b"]]


VOCABULARY = ROOT / "core" / "vocabulary"


def test_cores_vocabulary_imports_nothing_else_of_core() -> None:
    graph = import_graph(ROOT / "core")
    outside = {
        module: sorted(t for t in targets if not t.startswith("core.vocabulary"))
        for module, targets in graph.items()
        if module.startswith("core.vocabulary")
    }
    assert {m: t for m, t in outside.items() if t} == {}
    assert len(outside) >= 10  # the vocabulary is there, not somewhere else


def test_the_circle_finder_sees_a_circle(tmp_path: Path) -> None:
    graph = {"core.a": {"core.b"}, "core.b": {"core.c"}, "core.c": {"core.a"}, "core.d": set()}
    assert circles(graph) == [["core.a", "core.b", "core.c"]]
    package = tmp_path / "core"
    package.mkdir()
    (package / "a.py").write_text("from core import b\n")
    (package / "b.py").write_text("def late():\n    from core.a import thing\n")
    assert circles(import_graph(package)) == [["core.a", "core.b"]]


def test_no_core_module_is_past_400_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted((ROOT / "core").rglob("*.py"))
    }
    assert {k: n for k, n in sizes.items() if n > MAX_LINES} == {}, "split them by concept"


# --- no ambient run state ------------------------------------------------------------


def context_variables(path: Path) -> list[int]:
    """Lines of ``path`` that import ``contextvars`` or name a ``ContextVar``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "contextvars" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "contextvars":
            lines.append(node.lineno)
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name == "ContextVar":
                lines.append(node.lineno)
    return lines


def test_no_context_variable_in_core() -> None:
    """A run's state is passed explicitly (``core.run.state.Run``), never held ambient."""
    found = {
        str(path.relative_to(ROOT)): context_variables(path)
        for path in sorted((ROOT / "core").rglob("*.py"))
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_the_context_variable_checker_sees_one(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        "import contextvars\nfrom contextvars import ContextVar\na = contextvars.ContextVar('a')\n"
    )
    assert sorted(set(context_variables(module))) == [1, 2, 3]


# --- the control tools are known by name in their own module only -------------------

CONTROL = ROOT / "core" / "tools" / "control.py"
MODELS = ROOT / "core" / "models"
"""A model names the tools it calls (the demo model reads its own calls back): it is the
other end of the tool protocol, not the engine recognising a call."""


def control_names() -> set[str]:
    from core.tools.control import control_tools

    return {tool.spec.name for tool in control_tools()}


def name_comparisons(path: Path, names: set[str]) -> list[int]:
    """Lines of ``path`` that compare a value with a control tool's name: ``==``, ``!=``,
    ``in`` or ``not in`` with one of ``names`` as a string (alone or in a literal
    collection), or a ``case`` on one."""

    def named(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(named(e) for e in node.elts)
        return False

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            named(side) for side in (node.left, *node.comparators)
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and named(node.value):
            lines.append(node.lineno)
    return lines


def test_no_control_tool_is_compared_by_name_outside_its_module() -> None:
    names = control_names()
    files = [
        p for package in ("core", "conversations", "bot") for p in (ROOT / package).rglob("*.py")
    ]
    found = {
        str(path.relative_to(ROOT)): name_comparisons(path, names)
        for path in sorted(files)
        if path != CONTROL and not path.is_relative_to(MODELS)
    }
    assert {k: v for k, v in found.items() if v} == {}, "ask core.tools.control, or a tool's kind"
    strings = {
        node.value
        for node in ast.walk(ast.parse(CONTROL.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert names <= strings  # the one place that knows them


def test_the_name_checker_sees_a_control_tool_compared(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        "a = name == 'finish'\nb = name in ('ask_user', 'x')\nc = name == 'list_files'\n"
        "match name:\n    case 'propose_plan':\n        pass\n"
    )
    assert name_comparisons(module, {"finish", "ask_user", "propose_plan"}) == [1, 2, 5]


# --- time and ids come from the run context ------------------------------------------

RUN_CONTEXT = ROOT / "core" / "context.py"
WALL_CLOCK = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("time", "time"),
    ("time", "time_ns"),
    ("uuid", "uuid1"),
    ("uuid", "uuid4"),
}


def wall_clock_reads(path: Path) -> list[str]:
    """``datetime.now``, ``time.time``, ``uuid4`` and kin that ``path`` calls or imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in WALL_CLOCK:
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in ("time", "uuid"):
            found += [
                f"from {node.module} import {a.name} (line {node.lineno})"
                for a in node.names
                if (node.module, a.name) in WALL_CLOCK
            ]
    return found


def test_time_and_ids_come_from_the_run_context_module_only() -> None:
    files = [p for package in FORBIDDEN for p in sorted((ROOT / package).rglob("*.py"))]
    files += sorted((ROOT / "bot").rglob("*.py"))
    reads = {
        str(path.relative_to(ROOT)): wall_clock_reads(path) for path in files if path != RUN_CONTEXT
    }
    assert {k: v for k, v in reads.items() if v} == {}
    assert wall_clock_reads(RUN_CONTEXT)  # the one place that reads them


def test_the_clock_checker_sees_a_wall_clock_read(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        "import time, uuid\nfrom datetime import datetime\nfrom uuid import uuid4\n"
        "a = datetime.now()\nb = time.time()\nc = uuid.uuid4()\n"
    )
    assert len(wall_clock_reads(module)) == 4


# --- one writer of a tool call's state -----------------------------------------------

TOOL_STATE = ROOT / "core" / "tool_state.py"


def state_writes(path: Path) -> list[int]:
    """Lines of ``path`` that set a tool call record's state: ``ToolCallRecord(state=...)``
    or ``record.model_copy(update={"state": ...})``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        named = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        keywords = {k.arg: k.value for k in node.keywords}
        if named == "ToolCallRecord" and "state" in keywords:
            lines.append(node.lineno)
        update = keywords.get("update")
        if named == "model_copy" and isinstance(update, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value == "state" for k in update.keys):
                lines.append(node.lineno)
    return lines


REQUEST_STATE_WRITERS = {"core/vocabulary/fold.py": 1}
"""Modules whose ``model_copy(update={"state": ...})`` sets a pending request's state
(a :class:`core.vocabulary.requests.RequestState`), not a tool call's, and how many times:
the syntactic check cannot tell the two apart."""


def test_only_the_tool_state_module_sets_a_tool_calls_state() -> None:
    writes = {
        str(path.relative_to(ROOT)): state_writes(path)
        for path in sorted((ROOT / "core").rglob("*.py"))
        if path != TOOL_STATE
    }
    found = {k: v for k, v in writes.items() if v}
    assert {k: len(v) for k, v in found.items() if k in REQUEST_STATE_WRITERS} == (
        REQUEST_STATE_WRITERS
    )
    assert {k: v for k, v in found.items() if k not in REQUEST_STATE_WRITERS} == {}
    assert state_writes(TOOL_STATE)


# --- one writer of a conversation's lifecycle ---------------------------------------

LIFECYCLE = ROOT / "core" / "vocabulary" / "lifecycle.py"
FOLD = ROOT / "core" / "vocabulary" / "fold.py"
"""Folds a committed change's status into a snapshot, as the stores load it."""


def _is_move(node: ast.expr | None) -> bool:
    """``move(...)`` or ``lifecycle.move(...)``; a conditional of those and None counts."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return True
    if isinstance(node, ast.IfExp):
        return _is_move(node.body) and _is_move(node.orelse)
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")) == "move"


def lifecycle_writes(path: Path) -> list[int]:
    """Lines of ``path`` that set a conversation's status other than through
    :func:`core.vocabulary.lifecycle.move`: ``Change(status=...)`` with anything but
    its result, a ``Status(lifecycle=...)`` built, a ``"status"`` put by
    ``model_copy(update=...)`` or by subscript."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                key = target.slice if isinstance(target, ast.Subscript) else None
                if isinstance(key, ast.Constant) and key.value == "status":
                    lines.append(node.lineno)
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        named = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        keywords = {k.arg: k.value for k in node.keywords}
        if named == "Change" and "status" in keywords and not _is_move(keywords["status"]):
            lines.append(node.lineno)
        if named == "Status" and "lifecycle" in keywords:
            lines.append(node.lineno)
        update = keywords.get("update")
        if named == "model_copy" and isinstance(update, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value == "status" for k in update.keys):
                lines.append(node.lineno)
    return lines


def test_only_the_lifecycle_module_sets_a_conversations_status() -> None:
    writes = {
        str(path.relative_to(ROOT)): lifecycle_writes(path)
        for path in sorted((ROOT / "core").rglob("*.py"))
        if path not in (LIFECYCLE, FOLD)
    }
    assert {k: v for k, v in writes.items() if v} == {}
    assert lifecycle_writes(LIFECYCLE) and lifecycle_writes(FOLD)


def test_the_lifecycle_checker_sees_a_status_set_by_hand(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        "a = Change(status=lifecycle.RUNNING)\n"
        "b = Change(status=lifecycle.move(snap.status, lifecycle.RUNNING))\n"
        "c = Change(status=lifecycle.move(s, t) if waiting else None)\n"
        "d = snap.model_copy(update={'status': x})\n"
        "e = Status(lifecycle=Lifecycle.DONE)\n"
        "update['status'] = x\n"
    )
    assert sorted(lifecycle_writes(module)) == [1, 4, 5, 6]


# --- the architecture the code cites is in the repository ---------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"
OUTSIDE_NOTES = re.compile(r"\b(?:DESIGN|UX|STYLE)\.md\b")
"""Design notes kept outside the repository, which a clone does not have."""
CITATION = re.compile(r'docs/architecture\.md,\s+"([^"]+)"')
"""The one form a citation of the page takes: its path, a comma, the heading in double quotes."""
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*$", re.MULTILINE)
NOT_THE_REPOSITORY = {"__pycache__", "build", "dist", "node_modules"}
"""Folders of a checkout that hold no file of the repository (nor do hidden ones but .ci)."""


def repository_texts(root: Path = ROOT) -> dict[str, str]:
    """``{path relative to root: text}`` of every text file of the checkout: sources,
    tests, docs, settings and fixtures; virtual environments, caches, the bot's data
    (hidden folders), build output and files that are not UTF-8 text are left out."""
    texts: dict[str, str] = {}
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(
            d
            for d in subfolders
            if d not in NOT_THE_REPOSITORY
            and not d.endswith(".egg-info")
            and (d == ".ci" or not d.startswith("."))
        )
        for name in sorted(files):
            path = Path(folder, name)
            try:
                texts[str(path.relative_to(root))] = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
    return texts


def outside_citations(texts: dict[str, str]) -> dict[str, list[str]]:
    """``{path: ["<name> (line 3)", ...]}``: the notes outside the repository each file names."""
    found: dict[str, list[str]] = {}
    for path, text in texts.items():
        for match in OUTSIDE_NOTES.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.setdefault(path, []).append(f"{match.group()} (line {line})")
    return found


def architecture_citations(texts: dict[str, str]) -> dict[str, set[str]]:
    """``{path: sections it cites}``, each section's whitespace (a line break in a
    docstring) read as one space."""
    found: dict[str, set[str]] = {}
    for path, text in texts.items():
        for match in CITATION.finditer(text):
            found.setdefault(path, set()).add(" ".join(match.group(1).split()))
    return found


def headings(markdown: str) -> set[str]:
    """The headings of a Markdown page, without their ``#`` marks."""
    return {heading.rstrip("#").strip() for heading in HEADING.findall(markdown)}


def test_no_file_cites_design_notes_kept_outside_the_repository() -> None:
    assert outside_citations(repository_texts()) == {}, "cite docs/architecture.md instead"


def test_every_citation_of_the_architecture_names_one_of_its_headings() -> None:
    sections = headings(ARCHITECTURE.read_text(encoding="utf-8"))
    cited = architecture_citations(repository_texts())
    assert len(cited) >= 20  # the docstrings of every package point there
    unknown = {path: sorted(names - sections) for path, names in cited.items()}
    assert {path: names for path, names in unknown.items() if names} == {}
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_citation_checkers_see_what_they_look_for(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text("# Title\n\n## Test seams\n")
    (tmp_path / "core").mkdir()
    outside, page = "DESIGN" + ".md", "docs/architecture" + ".md"
    cited = f'"""See {outside}, and {page}, "Test\n    seams"."""\n'
    (tmp_path / "core" / "a.py").write_text(cited)
    (tmp_path / "README.md").write_text(f'{page}, "No such section"\n')
    for hidden in (".venv", ".threadbot"):
        (tmp_path / hidden).mkdir()
        (tmp_path / hidden / "b.py").write_text(f"# {outside}\n")
    texts = repository_texts(tmp_path)
    assert outside_citations(texts) == {"core/a.py": [f"{outside} (line 1)"]}
    assert architecture_citations(texts) == {
        "core/a.py": {"Test seams"},
        "README.md": {"No such section"},
    }
    assert headings((tmp_path / "docs" / "architecture.md").read_text()) == {"Title", "Test seams"}
