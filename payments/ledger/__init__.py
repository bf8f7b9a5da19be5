"""The payment ledger: authorizations and codes, charges, deliveries, orders, events."""
