"""Composition root: settings, host dispatch, the runtime proxy and the server CLI."""
