"""Tools the agent can call: control tools and workspace tools.

Every tool is declared read-only or mutating (:attr:`core.tools.base.Tool.read_only`);
the engine and the tool policy (:mod:`core.policy`) decide on that.

::

    base.py        the Tool protocol, ToolContext, ToolOutput and the Toolbox
    control.py     propose_plan, ask_user, finish, report_progress: specs and input checks
    workspace.py   list_files, read_file, write_file, edit_file, confined to the workspace
    command.py     run_command: a shell command bounded in time and output
    processes.py   naming and killing a command's process group
"""
