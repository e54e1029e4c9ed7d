"""The console adapter: try threadbot in a terminal, or drive it from a pipe or a test.

One channel, threads, short message ids. :mod:`adapters.console.translate` holds the
pure line grammar and transcript format; :mod:`adapters.console.runner` the
:class:`ConsoleAdapter` that reads input, feeds the hub and prints what it sends.
"""

from adapters.console.runner import ConsoleAdapter

__all__ = ["ConsoleAdapter"]
