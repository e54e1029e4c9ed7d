"""Failures raised by the console adapter.

The tree::

    ConsoleError
    └── StateFileError   the console's state file cannot be read, repaired or appended to
"""

from __future__ import annotations


class ConsoleError(Exception):
    """Base of every failure raised by ``adapters.console``."""


class StateFileError(ConsoleError):
    """The state file (``ConsoleAdapter(state_file=...)``) cannot be used; the message says why."""
