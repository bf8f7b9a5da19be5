"""Webhooks (spec 2.1, 5.5, 5.6, 6): endpoints, signing secrets and the outbox dispatcher.

The ledger writes each event and a pending ``webhook_attempts`` row in the transaction that
moves the money; everything here works from those rows. See ``docs/webhooks.md``.
"""
