"""The tool policy: may a tool call run now, must a person be asked, or is it denied?

- :mod:`core.policy.policy`: the policy and :meth:`~core.policy.policy.ToolPolicy.check`;
- :mod:`core.policy.rules`: permissions, rulings, explicit rules and a layer's rules;
- :mod:`core.policy.commands`: reading shell command lines for the policy;
- :mod:`core.policy.summary`: one-line summaries of calls for people.
"""
