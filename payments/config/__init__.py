"""Configuration as code (spec 2.9, 4.8): a developer's app, products, webhook and runtime
declared in one ``svc.config.v1`` document, planned, applied in one transaction, and
recorded as numbered revisions that can be rolled back to."""
