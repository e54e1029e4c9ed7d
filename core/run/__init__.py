"""The engine's runs: entry points, the agent composed of primitives, the tool calls, the history.

::

    state.py        Run: what one run knows (snapshot, history, totals, settings, ids, span,
                    the scope it works in)
    deps.py         RunDeps: what a run uses (journal, model, toolbox, workflow, outputs,
                    files, the composition)
    compose.py      the execution primitives: Step, Sequence, Loop (capped), Branch; Outcome
    agent.py        the agent: Loop(until done) { tool steps -> notes -> model step }
    steps.py        the agent's steps (ModelStep, ToolSteps, notes, budget, compaction...)
                    and InScope, a step that goes on in a nested scope
    scope.py        Scope: a run's context strategy, output cache and retry policy; nesting
    escalation.py   stuck? the failure streak from the journal; Escalate asks the people
    consultation.py ask_expert: one consultation of the expert model, within its budget
    decision.py     ModelDecision: a model turn typed (thinking, actions in order)
    engine.py       Engine: start, reply, decide, stop, remind, expire, interrupt, run
    live.py         the run's commits, folded into its snapshot
    settings.py     EngineSettings: turn cap, tokens, tool limits, request lifetime
    turn.py         Turns: drives the composed agent; a failure inside becomes a failed run
    model_turn.py   one model call: the request, the streamed answer, its usage and cost
    tool_calls.py   ToolCalls: drive a turn's calls to their end from the snapshot
    one_call.py     one tool call (ToolStep): the policy just before, the run, its result
    tool_step.py    a tool call's attempts under its retry policy, journaled as they fail
    admission.py    a new turn's calls and the states the policy gives them
    control.py      the control calls that end a turn: finish, propose_plan, ask_user
    close_calls.py  closing open calls on a stop, a failure, an expiry, a shutdown
    interrupting.py a reply that interrupts the run: its turn ends at the next tool
                    boundary, the calls not yet run cancelled
    restart.py      where a new request starts, and who may start a stopped one again
    fork.py         what a fork holds: the journal up to an entry, the calls open there
                    cancelled, the note that its files are new
    history.py      the model's messages, built from the journal (whole, or the executor's
                    own view when its model differs from the planner's)
    executor_view.py  where that view starts: the approved plan and its approval
    stats.py        the answer footer's totals
    slots.py        StepSlots: a model call or a command waits for its slot (unlimited
                    by default)
    addressed.py    the requester named on the plan, the question and the answer
                    (``mention_requester``)
"""
