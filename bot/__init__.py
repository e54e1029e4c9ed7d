"""The composition root: settings, CLI, wiring, process lifecycle."""
