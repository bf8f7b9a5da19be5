"""Developer accounts, console sessions, CLI grants and API keys (spec 2.6, 5.1-5.3)."""
