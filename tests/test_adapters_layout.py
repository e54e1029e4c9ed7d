"""The adapters' rooms stay small, and their failures hang from one root.

Checked on the source: no module of ``adapters/`` past 400 lines; every exception
class defined in ``adapters/`` derives from :class:`adapters.errors.AdapterError`;
and the errors modules load no platform SDK, so a caller can catch an adapter's
error without importing slack-bolt or discord.py.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from adapters.errors import AdapterError

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ROOT / "adapters"
MAX_LINES = 400
SDKS = ("slack_bolt", "slack_sdk", "discord", "aiohttp")
ERRORS_MODULES = (
    "adapters.errors",
    "adapters.console.errors",
    "adapters.slack.errors",
    "adapters.discord.errors",
)


def test_no_adapter_module_is_past_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted(ADAPTERS.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _modules() -> list[str]:
    return [
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in sorted(ADAPTERS.rglob("*.py"))
    ]


def _exception_classes() -> list[type[BaseException]]:
    """Every exception class defined (not imported) in a module of ``adapters/``."""
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, BaseException)
            and value.__module__ == name
        ]
    return found


def test_the_checker_finds_the_exception_classes() -> None:
    names = {error.__name__ for error in _exception_classes()}
    assert {"AdapterError", "StateFileError", "SocketModeDown", "DiscordStartError"} <= names


def test_every_adapter_error_derives_from_the_root() -> None:
    strays = [e.__qualname__ for e in _exception_classes() if not issubclass(e, AdapterError)]
    assert strays == []


def test_the_errors_modules_load_no_platform_sdk() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in ERRORS_MODULES)
        + f"print(sorted(m for m in {SDKS!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
