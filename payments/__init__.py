"""The data model and the payment API."""
