"""Fixtures for the chain tests."""

from __future__ import annotations

import pytest

from tests.chain.chain_env import ChainEnv, deploy_env


@pytest.fixture
def env() -> ChainEnv:
    """A fresh chain: TestUSDC and BudgetSpenderV2 deployed, one relayer, two of the three
    recipients allowlisted."""
    return deploy_env()
