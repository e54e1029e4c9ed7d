"""The Slack adapter: slack-bolt and slack-sdk at the edge, pure translators inside.

- :mod:`adapters.slack.types`: the raw payloads, as ``TypedDict`` classes;
- :mod:`adapters.slack.errors`: the Slack branch of the error tree;
- :mod:`adapters.slack.envelopes`: whether a delivery is fit for bolt (HTTP body,
  Socket Mode envelope);
- :mod:`adapters.slack.socket_mode`: Socket Mode that skips malformed envelopes;
- :mod:`adapters.slack.translate`: events, slash commands and buttons in, neutral
  events out (:class:`~adapters.slack.translate.BotIdentity` too);
- :mod:`adapters.slack.mentions`: whether a message mentions the bot;
- :mod:`adapters.slack.outbound`: neutral actions in, Web API calls out;
- :mod:`adapters.slack.web`: the three Web API clients and their retries;
- :mod:`adapters.slack.sending`: making the calls, finding half-sent posts;
- :mod:`adapters.slack.runner`: :class:`~adapters.slack.runner.SlackAdapter`, the
  bolt app's lifecycle and listeners;
- :mod:`adapters.slack.directory`: user groups as approvers;
- :mod:`adapters.slack.files`: the files people share, fetched with the bot token
  from Slack's file host only.
"""
