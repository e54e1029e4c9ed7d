"""The agent engine: runs, requests, tool calls, models, tools, policy and the journal.

``core`` knows nothing of chat platforms, HTTP frameworks or SQL (docs/architecture.md,
"The four packages"); it talks to the outside through protocols it owns: the
``Journal`` (:mod:`core.vocabulary.journal`), the ``Model`` (:mod:`core.models.base`) and the
``Toolbox`` (:mod:`core.tools.base`). Tests walk the imports to keep it that way,
with no import circle inside and no module past 400 lines.

Rooms by concept (docs/architecture.md, "Inside the packages")::

    errors.py         the error tree
    context.py        the run context: clock and ids (the one reader of the wall clock)
    people.py         a person: platform id and name
    inputs.py         what people give the engine: start, reply, decision, shared files
    lifecycle.py      idle, running, waiting(kind), done, failed, cancelled
    workflow.py       workflows as data (workflows/default.toml)
    journal.py        journal entries, tool call records, snapshot, Change, Journal
    tool_state.py     the tool call state table and the one function that moves it
    run_events.py     what the engine tells people (rendered by the hub)
    legacy.py         reading rows and entries stored before requests were typed
    faults.py         named crash points for tests
    requests/         one module per kind of pending request, its verdicts
    run/              the engine's entry points, the turn, the tool calls, the history
    policy/           the tool policy and the shell-command reader
    tools/            tool specs and their input checks; workspace and command tools
    files/            files shared in the thread, read into what the model sees
    models/           the Model protocol and its implementations
"""
