"""Tools the agent can call: control tools and workspace tools.

Every tool's kind is data, its spec's ``kind`` (:class:`core.models.base.ToolKind`:
``control``, ``read_only`` or ``mutating``); the engine and the tool policy
(:mod:`core.policy`) decide on that. Every tool's input is a pydantic model, its JSON
schema generated from it.

::

    base.py             the Tool protocol, ToolContext, ToolOutput and the Toolbox
    inputs.py           ToolInput: a tool's input model, its schema and its checks
    control.py          propose_plan, ask_user, finish, report_progress: a tagged union
    workspace.py        list_files, read_file, write_file, edit_file, in the workspace
    outputs.py          read_output: pages of a large output the model saw a preview of
    command.py          run_command: a shell command bounded in time and output
    sandbox.py          bubblewrap around a command (sandbox_network.py: its network)
    workspaces.py       a conversation's clone of the repository
    processes.py        naming and killing a command's process group
"""
