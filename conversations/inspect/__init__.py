"""A conversation as the run inspector shows it: its timeline from the journal, live.

Data only, no HTTP (the pages are :mod:`bot.inspector`; docs/architecture.md, "The
run inspector"). Rooms::

    items.py     the shapes: one timeline item per journal entry shown, the header
    turns.py     model turns: usage, cache share, cost, the calls asked (plans)
    results.py   tool results: state, duration, the output's first page
    people.py    messages, decisions and stops: who, by what means (the audit trail)
    notes.py     the other entries: workflow states, compactions, escalations, ...
    timeline.py  the whole timeline and the header, from one read of the store
    outputs.py   a large output paged (the output store, as ``read_output`` pages it)
    commits.py   this process's commits told at once (the engine's journal, wrapped)
    follow.py    a timeline followed as it grows: new and changed items, the header
"""
