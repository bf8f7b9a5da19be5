"""The account page's wallet-ownership proof: a server-issued challenge signed with
``personal_sign`` (gas-free, not a permit, spec 4.7), exchanged for a browser session.

The challenge is stateless (HMAC over wallet, nonce and times); single use is enforced
when the session row is inserted (its ``challenge_nonce`` is unique).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from eth_account import Account
from eth_account.messages import encode_defunct
from sqlalchemy import Delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from payments.errors import ApiError
from payments.ledger.permits import SIGNATURE_RE, check_address
from payments.portal.models import WalletSession
from payments.sweeps import BATCH, batch_delete, run_sweep

CHALLENGE_TTL = timedelta(minutes=5)
SESSION_TTL = timedelta(hours=12)
# Live sessions one wallet may hold (browsers, devices); a new proof beyond them ends the
# oldest, so a scripted wallet cannot pile up sessions (docs/decisions.md).
MAX_LIVE_SESSIONS = 10


@dataclass(frozen=True)
class Challenge:
    wallet: str  # lower-case
    nonce: str
    issued_at: datetime
    expires_at: datetime

    def message(self, portal_url: str) -> str:
        """What the wallet shows the person; it names no amount and moves no funds."""
        return ("Verify wallet ownership for the payment portal.\n"
                "This is not a payment: it moves no funds and costs no gas.\n\n"
                f"Wallet: {self.wallet}\nPortal: {portal_url}\nNonce: {self.nonce}\n"
                f"Issued: {_iso(self.issued_at)}\nExpires: {_iso(self.expires_at)}")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _mac(secret_key: str, body: bytes) -> str:
    digest = hmac.new(secret_key.encode(), b"portal-wallet-proof:" + body, hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def issue_challenge(secret_key: str, wallet: str, now: datetime) -> tuple[Challenge, str]:
    """A new challenge for ``wallet`` and its opaque token for the browser to send back."""
    owner = check_address(wallet, "address")
    issued = now.replace(microsecond=0)
    challenge = Challenge(owner, secrets.token_hex(16), issued, issued + CHALLENGE_TTL)
    body = json.dumps({"w": owner, "n": challenge.nonce, "i": int(issued.timestamp()),
                       "e": int(challenge.expires_at.timestamp())},
                      separators=(",", ":")).encode()
    token = base64.urlsafe_b64encode(body).decode().rstrip("=") + "." + _mac(secret_key, body)
    return challenge, token


def read_challenge(secret_key: str, token: str, now: datetime) -> Challenge:
    try:
        encoded, mac = token.split(".", 1)
        body = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        if not hmac.compare_digest(mac.encode(), _mac(secret_key, body).encode()):
            raise ValueError("bad mac")
        data = json.loads(body)
        challenge = Challenge(str(data["w"]), str(data["n"]),
                              datetime.fromtimestamp(int(data["i"]), UTC),
                              datetime.fromtimestamp(int(data["e"]), UTC))
    except (ValueError, KeyError, TypeError):
        raise ApiError("wallet_proof_invalid", 422, "The wallet check is not valid; start "
                       "again.") from None
    if challenge.expires_at <= now:
        raise ApiError("wallet_proof_expired", 422, "The wallet check expired; verify the "
                       "wallet again.")
    return challenge


def recover_signer(message: str, signature: object) -> str:
    if not isinstance(signature, str) or not SIGNATURE_RE.match(signature):
        raise ApiError("wallet_proof_invalid", 422, "'signature' must be a 65-byte hex "
                       "signature.", field="signature")
    try:
        signer: str = Account.recover_message(encode_defunct(text=message),
                                              signature=signature)
    except Exception:  # malformed signature bytes: eth-keys raises several types
        raise ApiError("wallet_proof_invalid", 422, "The signature is not valid.") from None
    return signer.lower()


@dataclass(frozen=True)
class OpenedSession:
    token: str  # goes into the cookie only
    record: WalletSession


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def open_wallet_session(session: Session, challenge: Challenge, signature: object,
                        portal_url: str, now: datetime) -> OpenedSession:
    """Check the signature and open a session; raises if the challenge was used before."""
    if recover_signer(challenge.message(portal_url), signature) != challenge.wallet:
        raise ApiError("wallet_proof_invalid", 422, "The signature was not made by this wallet "
                       "for this check.")
    sweep_wallet_sessions(session, now)
    token = secrets.token_urlsafe(32)
    record = WalletSession(token_hash=_hash(token), challenge_nonce=challenge.nonce,
                           wallet=challenge.wallet, csrf_token=secrets.token_urlsafe(24),
                           created_at=now, expires_at=now + SESSION_TTL)
    session.add(record)
    try:
        session.flush()
    except IntegrityError:
        raise ApiError("wallet_proof_used", 409, "This wallet check was already used; verify "
                       "the wallet again.") from None
    _end_oldest(session, record, now)
    return OpenedSession(token, record)


def sweep_wallet_sessions(session: Session, now: datetime) -> None:
    """Delete a batch of the rows no cookie can use any more (``dead_sessions``). Run on
    every proof, so the table holds little more than the live sessions."""
    for statement in dead_sessions(now):
        run_sweep(session, statement)


def dead_sessions(now: datetime, batch: int = BATCH) -> tuple[Delete, Delete]:
    """The two sweeps of dead sessions, each read through its own index (migration 0023):
    expired ones (``expires_at``), and ended ones whose challenge has expired too
    (``ix_portal_wallet_sessions_ended``; until then the row's unique ``challenge_nonce`` is
    what refuses a replay of that signed challenge). A live session is in neither."""
    return (batch_delete(WalletSession.id, WalletSession.expires_at <= now, batch=batch),
            batch_delete(WalletSession.id, WalletSession.revoked_at.is_not(None),
                         WalletSession.created_at <= now - CHALLENGE_TTL, batch=batch))


def _end_oldest(session: Session, opened: WalletSession, now: datetime) -> None:
    """End the wallet's live sessions beyond the newest ``MAX_LIVE_SESSIONS``."""
    older = session.scalars(
        select(WalletSession.id)
        .where(WalletSession.wallet == opened.wallet, WalletSession.revoked_at.is_(None),
               WalletSession.expires_at > now)
        .order_by(WalletSession.created_at.desc(), WalletSession.id.desc())
        .offset(MAX_LIVE_SESSIONS)).all()
    if older:
        session.execute(update(WalletSession).where(WalletSession.id.in_(older))
                        .values(revoked_at=now))


def live_wallet_session(session: Session, token: str | None,
                        now: datetime) -> WalletSession | None:
    if not token or len(token) > 200:
        return None
    record = session.scalar(select(WalletSession).where(
        WalletSession.token_hash == _hash(token)))
    if record is None or record.revoked_at is not None or record.expires_at <= now:
        return None
    return record


def end_wallet_session(session: Session, record: WalletSession, now: datetime) -> None:
    session.execute(update(WalletSession).where(WalletSession.id == record.id,
                                                WalletSession.revoked_at.is_(None))
                    .values(revoked_at=now))
