"""The Discord adapter: discord.py at the edge, pure translators inside.

- :mod:`adapters.discord.types`: the raw payloads, as ``TypedDict`` classes;
- :mod:`adapters.discord.errors`: the Discord branch of the error tree;
- :mod:`adapters.discord.payload`: ids, tokens and names read with Discord's rules;
- :mod:`adapters.discord.identity`: who the bot is, from READY;
- :mod:`adapters.discord.translate`: messages and reactions in, neutral events out;
- :mod:`adapters.discord.interactions`: slash commands and buttons in;
- :mod:`adapters.discord.mentions`: whether a message mentions the bot;
- :mod:`adapters.discord.outbound`: neutral actions in, REST calls out;
- :mod:`adapters.discord.rest`: one REST call through discord.py's HTTP client;
- :mod:`adapters.discord.sending`: the sender (nonces, archived threads, files);
- :mod:`adapters.discord.inbound`: gateway dispatches in order, to the hub;
- :mod:`adapters.discord.acks`: answering an interaction within 3 s;
- :mod:`adapters.discord.gateway_guard`: a dispatch discord.py cannot parse is skipped;
- :mod:`adapters.discord.runner`: :class:`~adapters.discord.runner.DiscordAdapter`,
  the connection's lifecycle;
- :mod:`adapters.discord.directory`: roles as approvers;
- :mod:`adapters.discord.texts`: what the hub says on Discord;
- :mod:`adapters.discord.files`: attachments, fetched from Discord's CDN with no token.
"""
