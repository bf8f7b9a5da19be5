"""free_port's range: its own slice per test worker (SVC_FREE_PORTS), the default otherwise."""

from __future__ import annotations

import pytest

from ops.cluster.processes import PORTS_ENV, free_port, port_range


def test_a_slice_from_the_environment_is_where_ports_come_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORTS_ENV, "24000-24100")
    assert port_range() == (24000, 24100)
    assert all(24000 <= free_port() < 24100 for _ in range(50))


# Digits to str.isdigit(): int() refuses "\u00b2" (a ValueError) and reads Arabic-Indic 24000.
@pytest.mark.parametrize("raw", ["", "x-y", "30000-20000", "80-90", "20000-70000", "20000",
                                 "\u00b2-30000", "\u0662\u0664\u0660\u0660\u0660-24100"])
def test_a_malformed_slice_falls_back_to_the_whole_range(
        monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(PORTS_ENV, raw)
    assert port_range() == (20000, 32000)


def test_a_port_is_handed_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two servers given the same port, both checked free before either bound it: a cluster
    # start asks for a dozen at once. Ten ports of their own (below every worker's slice and
    # the ephemeral range: nothing else binds them): ten calls, ten ports, then none.
    monkeypatch.setenv(PORTS_ENV, "19100-19110")
    given = [free_port() for _ in range(10)]
    assert sorted(given) == list(range(19100, 19110))
    with pytest.raises(RuntimeError, match="no free port"):
        free_port()
