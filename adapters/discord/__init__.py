"""The Discord adapter: pure translators (``translate``, ``outbound``) for gateway payloads."""
