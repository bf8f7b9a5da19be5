"""Runtime manifest and origin rules (shared with the webhook URL policy)."""
