"""Tools the agent can call: control tools and workspace tools.

Every tool is declared read-only or mutating (:attr:`Tool.read_only`); the engine
and, later, the tool policy decide on that.
"""
