"""Runtime lifecycle: configure, verify, disable, domain requests, operator approvals."""
