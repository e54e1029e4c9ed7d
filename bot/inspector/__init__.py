"""The run inspector: conversations, their timelines, decisions and cost, in a browser.

Served on the operations address (:mod:`bot.ops`) under ``/inspector/`` when the
setting ``inspector`` is on (off by default), to operators only (docs/architecture.md,
"The run inspector"). Its rooms:

- :mod:`bot.inspector.web`: what every page uses (:class:`~bot.inspector.web.Inspector`:
  the store, templates rendered and redacted, JSON, the audit as the signed-in operator);
- :mod:`bot.inspector.guard`: who may ask (the ``Host`` header, the session cookie, the
  CSRF token) and the headers every answer carries;
- :mod:`bot.inspector.sign_in`: signing in and out, the refused sign-ins counted and
  limited (:mod:`bot.inspector.refusals`);
- the pages, each a module with its ``routes``: the conversation list
  (:mod:`bot.inspector.listing`), one conversation's timeline and its live updates, the
  usage charts, and the actions (fork, stop);
- :mod:`bot.inspector.routes`: puts them together on the operations address's app.
"""
