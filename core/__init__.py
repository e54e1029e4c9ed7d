"""The agent engine: runs, lifecycle, model, tools and the journal protocols.

``core`` knows nothing of chat platforms, HTTP frameworks or SQL (DESIGN.md, "The
four packages"); it talks to the outside through the protocols in
:mod:`core.protocols`. A test walks the imports to keep it that way.
"""
