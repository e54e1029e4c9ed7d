"""The version of threadbot that runs (``threadbot --version``, ``threadbot_build_info``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def installed_version() -> str:
    """The installed distribution's version (``pyproject.toml``), or ``unknown (not installed)``."""
    try:
        return version("threadbot")
    except PackageNotFoundError:
        return "unknown (not installed)"
