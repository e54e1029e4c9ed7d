"""Adapters: one folder per platform, translating at the edge.

A platform payload comes in and a neutral :mod:`conversations.events` event goes
out; a neutral action comes in and platform calls go out. Translators are pure and
tested on real payloads; a thin runner wires the SDK around them. No adapter
imports ``core`` (docs/architecture.md, "The four packages";
``tests/test_architecture.py`` checks the arrows).

Shared by the platforms, one module per concept:

- :mod:`adapters.errors`: the error root, its tree drawn in the docstring;
- :mod:`adapters.fields`: reading a raw payload's fields without trusting them;
- :mod:`adapters.drops`: the one log line for a payload a translator drops;
- :mod:`adapters.markup`: where chat markup hides text (code, quotes), and
  cutting the bot's mentions out of the rest;
- :mod:`adapters.limits`: text past a platform's limits (cut edits and labels,
  long answers as files);
- :mod:`adapters.inbound`: what a runner does with a translated event (the
  bot-to-bot cap, handing it to the hub);
- :mod:`adapters.downloads`: fetching a shared file from a platform's file host,
  its token sent there only.

The platforms: :mod:`adapters.slack`, :mod:`adapters.discord`, :mod:`adapters.console`.
Nothing here imports a platform SDK: importing ``adapters`` or a platform's
``errors`` module loads neither slack-bolt nor discord.py.
"""
