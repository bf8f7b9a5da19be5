"""The runtime host's gate and ``serves_runtime`` state one rule (``runtime_blockers``)."""

from __future__ import annotations

import itertools

from payments.models import AppStatus, DomainRequestStatus, RuntimeStatus, serves_runtime
from router.gating import RuntimeRoute, gate


def route(runtime: str, domain: str, origin: str | None, *, kill_switch: bool = False,
          app_status: str = AppStatus.ACTIVE) -> RuntimeRoute:
    return RuntimeRoute(app_id="zapp_1", slug="game", name="Game", origin=origin,
                        app_status=app_status, runtime_status=runtime, domain_status=domain,
                        kill_switch=kill_switch, entry_path="/", app_path="/")


def test_gate_and_serves_runtime_agree_on_every_runtime_state() -> None:
    served = 0
    for runtime, domain, origin in itertools.product(
            list(RuntimeStatus), list(DomainRequestStatus), (None, "https://game.example")):
        decision = gate(route(runtime, domain, origin))
        assert decision.open == serves_runtime(runtime, domain, origin)
        served += decision.open
        # one worded reason per failing part, none of them a raw status value
        failing = ((runtime != RuntimeStatus.ACTIVE) + (origin is None)
                   + (domain != DomainRequestStatus.APPROVED))
        assert len(decision.reasons) == failing
        assert all(reason.endswith((".", ")")) for reason in decision.reasons), decision
        assert decision.status == (200 if decision.open else 503)
    assert served == 1


def test_kill_switch_and_app_status_close_a_served_runtime() -> None:
    args = (RuntimeStatus.ACTIVE, DomainRequestStatus.APPROVED, "https://game.example")
    assert gate(route(*args)).open
    paused = gate(route(*args, kill_switch=True))
    assert not paused.open and paused.reasons == (
        "The app has been paused by the service operators.",)
    suspended = gate(route(*args, app_status=AppStatus.SUSPENDED))
    assert not suspended.open and "suspended" in suspended.reasons[0]
    assert gate(None).status == 404
