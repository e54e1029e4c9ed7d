"""The Slack adapter: pure translators (``translate``, ``outbound``) and their runner."""
