"""Implementations of the :class:`core.models.base.Model` protocol.

- :mod:`core.models.base`: the protocol, its request and the events it streams;
- :mod:`core.models.anthropic`: the Anthropic Messages API (imports ``anthropic``:
  import it only where a real model is used);
- :mod:`core.models.scripted`: canned turns for tests and model scripts;
- :mod:`core.models.demo`: the built-in demo model (no API key needed).
"""
