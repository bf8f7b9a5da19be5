"""Verify the ``paymentProof`` of a trusted-server charge (spec 1.4 item 3, 4.4).

Scheme ``svc.proof.v1``: ``signature = "sha256=" + hex(HMAC-SHA256(api_key,
canonical_json(payload)))``, where ``canonical_json`` sorts keys, uses no whitespace and
keeps non-ASCII characters as UTF-8. The key is the very ``zpk_`` secret the backend
called ``POST /api/charges`` with, so only that backend (and the service) can sign.

A verified proof proves the charge; whether to fulfil from it alone is its
``deliveryStatus`` (:func:`proof_grantable`): a ``settled_first`` product's proof says
``awaiting_settlement``, and is granted later from ``payment.delivered`` or a delivery
lookup that says ``delivered``. The status is the one at issue time (a replay of the charge
returns the same proof after settlement). A proof issued before proofs carried the status
proves no status: treat it as not grantable and look the delivery up (an optimistic one
is ``delivered`` there).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

SCHEME = "svc.proof.v1"
GRANTABLE_STATUS = "delivered"
_SIGNATURE_RE = re.compile(r"^sha256=[0-9a-f]{64}\Z")


class ProofError(ValueError):
    """The proof is missing, malformed, of another scheme, or not signed with this key.

    Never grant on a ``ProofError``: fall back to a trusted delivery lookup.
    """


def canonical_json(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def verify_payment_proof(proof: Any, api_key: str) -> dict[str, Any]:
    """Return the proof's payload if ``api_key`` signed exactly it; else raise ProofError.

    ``proof`` is the ``paymentProof`` object of the charge response, as parsed from JSON.
    """
    if not isinstance(api_key, str) or not api_key:
        raise ProofError("An API key is needed to verify a paymentProof.")
    if not isinstance(proof, Mapping):
        raise ProofError("paymentProof is missing or not an object.")
    if proof.get("scheme") != SCHEME:
        raise ProofError(f"Unsupported paymentProof scheme {proof.get('scheme')!r}; "
                         f"expected {SCHEME!r}.")
    payload = proof.get("payload")
    if not isinstance(payload, Mapping):
        raise ProofError("paymentProof.payload is missing or not an object.")
    signature = proof.get("signature")
    if not isinstance(signature, str) or not _SIGNATURE_RE.match(signature):
        raise ProofError("paymentProof.signature is missing or not 'sha256=<64 hex>'.")
    try:
        message = canonical_json(payload)
    except (TypeError, ValueError):
        raise ProofError("paymentProof.payload is not plain JSON.") from None
    expected = "sha256=" + hmac.new(api_key.encode(), message, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise ProofError("paymentProof signature does not match: the payload was changed or "
                         "signed with another key.")
    return dict(payload)


def proven_delivery_status(payload: Mapping[str, Any]) -> str | None:
    """The delivery's status when the service issued the proof (``deliveryStatus`` of a
    payload :func:`verify_payment_proof` returned), or None for a proof issued before
    proofs carried it."""
    status = payload.get("deliveryStatus")
    return status if isinstance(status, str) else None


def proof_grantable(payload: Mapping[str, Any]) -> bool:
    """Whether a verified payload alone lets the backend fulfil: only ``delivered``.

    Otherwise (``awaiting_settlement``, or a proof without the status) grant from
    ``payment.delivered`` or a delivery lookup of ``payload["deliveryId"]`` instead.
    """
    return proven_delivery_status(payload) == GRANTABLE_STATUS
