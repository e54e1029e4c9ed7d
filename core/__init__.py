"""The agent engine: runs, requests, tool calls, models, tools, policy and the journal.

``core`` knows nothing of chat platforms, HTTP frameworks or SQL (docs/architecture.md,
"The four packages"); it talks to the outside through protocols it owns: the
``Journal`` (:mod:`core.vocabulary.journal`), the ``Model`` (:mod:`core.models.base`)
and the ``Toolbox`` (:mod:`core.tools.base`). Tests walk the imports to keep it that
way, with no import circle between modules nor between rooms, and no module past
400 lines.

Rooms by concept, from the top floor down (docs/architecture.md, "Inside the
packages")::

    run/          one run: Run (what it knows) and RunDeps (what it uses); the engine's
                  entry points, the execution primitives and the agent composed of them,
                  scopes, the model call, the tool calls, the history
    requests/     one module per kind of pending request: how it opens and is decided
    files/        files shared in the thread, read into what the model sees
    contexts/     context strategies (flat, task_list, task_tree, none) and notes with
                  lifetimes: what the model is told of its plan; what compaction keeps
    tool_state.py the tool call state table and the one function that moves it
    policy/       the tool policy and the shell-command reader
    tools/        the tools and their typed inputs: control tools (a tagged union),
                  workspace and command tools, the sandbox
    models/       the Model protocol, a tool's spec and kind; Anthropic, scripted, demo
    tracing.py    the spans of a run, its model calls and tool calls
    pricing.py    what a model call costs, and the budgets
    workflow.py   workflows as data (workflows/default.toml)
    outputs/      large tool outputs kept whole, previewed: the cache strategies
    secrets.py    the bot's secrets taken out of what is stored and posted
    context.py    the run context: clock and ids (the one reader of the wall clock)
    faults.py     named crash points for tests
    retry.py      retry policies of tool calls: none, fixed, exponential (jitter by hash)
    vocabulary/   the ground floor, imports nothing else of core: journal entries, tool
                  records, snapshot, Change and the Journal protocol, pending requests
                  and verdicts, the lifecycle and its table, run events, inputs, errors
"""
