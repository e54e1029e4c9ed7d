"""The engine's runs: entry points, the turn, the tool calls, the history.

::

    engine.py       Engine: start, reply, decide, stop, remind, expire, interrupt, run
    settings.py     EngineSettings: turn cap, tokens, tool limits, request lifetime
    turn.py         RunLoop: model turn, tools, again; the turn cap and model failures
    tool_calls.py   ToolRunner: drive a turn's calls to their end from the store
    admission.py    a new turn's calls and the states the policy gives them
    control.py      the control calls that end a turn: finish, propose_plan, ask_user
    close_calls.py  closing open calls on a stop, a failure, an expiry, a shutdown
    history.py      the model's messages, built from the journal
    stats.py        the answer footer's totals
"""
