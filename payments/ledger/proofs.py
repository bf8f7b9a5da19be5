"""``paymentProof`` of trusted-server charges (spec 4.4).

Scheme ``svc.proof.v1``: ``signature = "sha256=" + hex(HMAC-SHA256(api_key_secret,
canonical_json(payload)))`` where ``canonical_json`` sorts keys and uses no whitespace.
The key is the very ``zpk_`` secret that made the call: the backend that holds it can
verify the proof (``svc.proofs.verify_payment_proof``), and the service stores nothing new.

The payload says what it proves: besides the charge it carries the product's ``riskMode``
and the delivery's ``deliveryStatus`` when the proof was issued, so a backend granting from
the proof alone sees that a ``settled_first`` delivery is ``awaiting_settlement``. It is a
statement about that moment: an idempotent replay returns the stored proof unchanged, even
after settlement; the delivery lookup and ``payment.delivered`` tell the later state.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

SCHEME = "svc.proof.v1"


def canonical_json(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def sign_payment_proof(api_key_secret: str, payload: dict[str, Any]) -> dict[str, Any]:
    digest = hmac.new(api_key_secret.encode(), canonical_json(payload), hashlib.sha256)
    return {"scheme": SCHEME, "payload": payload, "signature": "sha256=" + digest.hexdigest()}
