"""A trusted charge made before proofs carried ``riskMode`` and ``deliveryStatus``: its
stored answer rewritten to what the service stored then (the payload without those fields,
signed with the calling key), so an idempotent replay returns that older proof."""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction
from payments.ledger.models import IdempotencyRecord
from payments.ledger.proofs import sign_payment_proof

NEW_FIELDS = ("riskMode", "deliveryStatus")


def legacy_proof(proof: dict[str, Any], api_key: str) -> dict[str, Any]:
    """``proof`` as the service signed it before the new fields."""
    payload = {k: v for k, v in proof["payload"].items() if k not in NEW_FIELDS}
    return sign_payment_proof(api_key, payload)


def make_stored_charge_legacy(sessions: sessionmaker[Session], api_key: str,
                              idempotency_key: str) -> dict[str, Any]:
    """Rewrite the stored answer of the charge made with ``idempotency_key``; its proof."""
    with transaction(sessions) as session:
        record = session.scalars(select(IdempotencyRecord).where(
            IdempotencyRecord.scope == "charge",
            IdempotencyRecord.key == idempotency_key)).one()
        body = copy.deepcopy(record.response_body)
        body["paymentProof"] = legacy_proof(body["paymentProof"], api_key)
        record.response_body = body
        proof: dict[str, Any] = body["paymentProof"]
        return proof
