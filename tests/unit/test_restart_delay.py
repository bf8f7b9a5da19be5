"""How soon the supervisor replaces a server process that died (router/processes.py)."""

from __future__ import annotations

from router.processes import MAX_RESTART_DELAY, QUICK_DEATH_SECONDS, restart_delay


def test_a_process_that_was_up_a_while_is_replaced_at_once() -> None:
    assert restart_delay(QUICK_DEATH_SECONDS, 0) == 0
    assert restart_delay(3600, 7) == 0  # earlier young deaths are forgiven


def test_young_deaths_in_a_row_wait_longer_up_to_a_cap() -> None:
    delays = [restart_delay(1.0, n) for n in range(8)]
    assert delays[:5] == [1, 2, 4, 8, 16]
    assert delays[5:] == [MAX_RESTART_DELAY] * 3
