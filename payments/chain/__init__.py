"""On-chain settlement: the compiled contracts and their loader."""
