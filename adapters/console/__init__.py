"""The console adapter: try threadbot in a terminal, or drive it from a pipe or a test.

One channel, threads, short message ids. :mod:`adapters.console.translate` holds the
pure line grammar and transcript format; :mod:`adapters.console.runner` the
:class:`ConsoleAdapter` that reads input, feeds the hub and prints what it sends;
:mod:`adapters.console.state` what it remembers (optionally in a state file);
:mod:`adapters.console.errors` the console's branch of :mod:`adapters.errors`.
"""

from adapters.console.errors import ConsoleError, StateFileError
from adapters.console.runner import ConsoleAdapter

__all__ = ["ConsoleAdapter", "ConsoleError", "StateFileError"]
