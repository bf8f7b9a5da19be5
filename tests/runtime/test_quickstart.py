"""The timed quick launch (bench/quickstart_bench.py), run once end to end: an empty
database, sign-up, CLI, config apply, runtime verification, operator approval, a payment
on the developer's runtime and its settlement. Any step that does not reach its outcome
raises and fails the test."""

from __future__ import annotations

from pathlib import Path

from tests.support.quickstart import quickstart


def test_quick_launch_from_zero_to_a_settled_charge(tmp_path: Path) -> None:
    result = quickstart.run_once(tmp_path)
    assert list(result.steps) == list(quickstart.STEPS)
    facts = result.facts
    assert facts["slug"] == "quick-game"
    # Granted once, from the signed webhook, in the copied app's own store.
    assert quickstart.item_count(facts["inventory"], quickstart.PRODUCT) == 1
    # Settled on the in-process chain: pay_to received exactly the price.
    assert facts["balanceAfter"] == facts["balanceBefore"] + 10_000
    # The secrets shown once went to .env only, never to either process's output.
    for secret in facts["secrets"].values():
        assert secret not in facts["serverOutput"] + facts["appOutput"]
