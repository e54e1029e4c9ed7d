"""Runners: where a run is carried out (docs/architecture.md, "Runners").

:mod:`core.runner.protocol` is the protocol between the front end and the runs;
:mod:`core.runner.local` runs them in the bot process.
"""
