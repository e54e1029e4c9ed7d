"""Failures raised by the console adapter, a branch of :class:`adapters.errors.AdapterError`.

The tree::

    AdapterError                  adapters.errors
    └── ConsoleError
        └── StateFileError        the console's state file cannot be read, repaired or
                                  appended to
"""

from __future__ import annotations

from adapters.errors import AdapterError


class ConsoleError(AdapterError):
    """Base of every failure raised by ``adapters.console``."""


class StateFileError(ConsoleError):
    """The state file (``ConsoleAdapter(state_file=...)``) cannot be used; the message says why."""
