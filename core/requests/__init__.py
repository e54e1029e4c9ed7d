"""Pending requests: one module per kind, each opening it, deciding it, and writing
the texts the model reads about it.

::

    common.py         ids and times of new requests, from the run context
    plan_approval.py  propose_plan: a plan version to approve
    plan_revision.py  a rejected plan: what should change? the answer revises it
    question.py       ask_user: a question answered in words
    tool_approval.py  the gated calls of a turn, decided call by call or all at once
    go_on.py          the turn cap or a model failure: go on, or stop here?
    escalation.py     stuck (commands keep failing): the people are asked, in words
    decide.py         a decision or a reply, dispatched to its request's kind
    closing.py        the event that edits a closed request's message
    call_verdicts.py  who decided each call of a tool approval, and how
    audit.py          the audit trail's record of a decision, a reply and a stop

The requests' shapes and verdicts are words of the vocabulary
(:mod:`core.vocabulary.requests`, :mod:`core.vocabulary.verdicts`).
"""
