"""Core's vocabulary: the words every room of ``core`` shares, on the ground floor.

It imports nothing else of ``core``, so every other room stands on it and none of
its modules is tied into a circle (docs/architecture.md, "Inside the packages")::

    errors.py        the error tree
    people.py        a person: platform id and name
    lifecycle.py     idle, running, waiting(kind), done, failed, cancelled; the table of
                     allowed moves and the one function that makes them
    verdicts.py      what a person decided, a tagged union keyed by call
    approvals.py     approval scopes, the rules a wider approval remembers, their matches
    requests.py      pending requests, a tagged union (what a waiting conversation waits for)
    entries.py       journal entries, a tagged union, and the journal record
    tool_records.py  a tool call's durable record and its states
    snapshot.py      all a run reads of one conversation
    run_events.py    what the engine tells people (rendered by the hub)
    journal.py       Change, the one way state moves, and the Journal protocol
    fold.py          a committed Change applied to a snapshot
    inputs.py        what people give the engine: a message, a decision, shared files
    audit.py         how a person acted (the means), and the audit trail's record of a
                     decision or a refused attempt
"""
