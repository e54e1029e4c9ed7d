"""Platform-neutral chat: events and actions, the durable store, and the hub.

``conversations`` imports ``core`` and never a platform SDK; adapters import
``conversations`` and never ``core`` (docs/architecture.md, "The four packages").
"""
