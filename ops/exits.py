"""``svc-ops``'s exit codes, and what a status check's answer exits with.

Every command: 0 done; 1 not done, because the ledger's rules refuse it (``ApiError``) or
the chain failed (the node did not answer, a transaction reverted); 2 refused before
anything was tried (bad input, a bad ``--operator`` name among it, settings missing or
malformed, a usage error, a confirmation not given). The status
checks (``chain status``, ``relayer status``) keep those meanings and add 3, so a monitor
tells their answers apart without reading JSON: 1 the node did not answer (the provider,
the network), 2 these settings name nothing to check, 3 the node answers and a check fails
(the contract, a relayer, its gas money, the fee cap: the operators' to fix)."""

from __future__ import annotations

from enum import IntEnum

from payments.chain.gateway import Readiness


class Exit(IntEnum):
    OK = 0
    NOT_DONE = 1  # also: a status check's node is down
    REFUSED = 2  # also: a status check's settings do not name a chain to check
    DEGRADED = 3  # a status check: the node answers, and a check fails


def status_exits(degraded: str) -> str:
    """A status command's exit codes, for its ``--help``; ``degraded``: what fails for 3."""
    return ("exit codes: 0 ready; 1 down: the node does not answer (or answers with an "
            "error); 2 not configured: the settings name no JSON-RPC chain or no spender, or "
            f"are malformed (or an argument is); 3 degraded: the node answers and {degraded}")


def readiness_exit(readiness: Readiness) -> Exit:
    """``ok`` is ready; ``down`` with ``problems`` is a node that answered and a check that
    failed; ``down`` without is a node that did not answer (its error in ``detail``)."""
    if readiness.status == "ok":
        return Exit.OK
    return Exit.DEGRADED if readiness.detail.get("problems") else Exit.NOT_DONE
