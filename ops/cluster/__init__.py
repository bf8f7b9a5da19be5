"""The production topology on loopback, for operators to try and the fault tests to break
(docs/deploy.md): ``python -m ops.cluster`` (scripts/cluster.sh)."""
