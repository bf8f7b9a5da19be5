"""A permit counts once (spec 1.8, 4.6, 3.6).

Once the relayer sends a permit, its fields and signature are public on chain. Were the
same permit accepted again at ``return-code``, anyone could get a summary code for any app
on the user's budget, and bind their own game account to the user's wallet. The ledger
records a permit once; the wallet's current budget is reached again only with an owner
proof, bound to one app and return URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction
from payments.ledger.models import (
    AccountConnection,
    AuthCode,
    Authorization,
    AuthorizationStatus,
    RelayStatus,
)
from payments.models import AllowlistStatus
from tests.factories import add_developer, add_owned_app
from tests.ledger.flow import (
    PayWorld,
    build_world,
    handoff_token,
    sign_owner_proof,
    sign_permit,
    wallet,
)
from tests.support.router import RouterFactory

SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
RIVAL = "rival"


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    with start_router() as router:
        world = build_world(router, sessions)
        # Another organization's app, able to be paid: where a replayed permit would go.
        _, rival_org = add_developer(sessions, "rival-dev")
        add_owned_app(sessions, rival_org, RIVAL,
                      pay_to="0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
                      recipient_allowlist_status=AllowlistStatus.ALLOWED)
        yield world


def count(world: PayWorld, model: type) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def return_code(world: PayWorld, app: str, origin: str | None = None,
                **body: Any) -> httpx.Response:
    """``return-code`` as the portal calls it, or, without ``origin``, as a script would."""
    headers = {} if origin is None else {"origin": origin}
    with world.api(**headers) as api:
        return api.post("/api/authorizations/return-code", json={
            "app": app, "returnUrl": f"{world.portal}/{app}", **body})


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == code and response.json()["message"]
    assert "redirectUrl" not in response.json()


def rival_handoff(world: PayWorld) -> str:
    """A handoff token the rival app's own backend would get for its own player."""
    from payments.db import transaction, utcnow
    from payments.developer.keys import KEY_SCOPES, create_key
    from payments.models import App
    with transaction(world.sessions) as session:
        app = session.scalars(select(App).where(App.slug == RIVAL)).one()
        assert app.organization_id is not None
        secret = create_key(session, organization_id=app.organization_id, app_id=app.id,
                            label="rival", scopes=list(KEY_SCOPES), environment="test",
                            created_by=None, now=utcnow()).secret
    with world.api(authorization=f"Bearer {secret}") as backend:
        started = backend.post("/api/account-handoffs", json={
            "appSlug": RIVAL, "merchantUserId": "attacker", "gameAccountLabel": "Attacker",
            "returnUrl": f"{world.portal}/{RIVAL}"})
    assert started.status_code == 200, started.text
    assert started.json()["status"] == "needs_connection"
    return handoff_token(started.json()["handoff"]["portalUrl"])


def test_a_recorded_permit_gets_no_code_for_another_app(world: PayWorld) -> None:
    user = wallet(1)
    permit = sign_permit(user, 1_000_000)
    first = return_code(world, world.app.slug, world.portal, permit=permit)
    assert first.status_code == 200, first.text
    codes = count(world, AuthCode)
    refused(return_code(world, RIVAL, permit=permit), 409, "permit_already_used")
    refused(return_code(world, RIVAL, world.portal, permit=permit), 409, "permit_already_used")
    # Nor for the app it was signed in, nor to bind someone else's account to the wallet.
    refused(return_code(world, world.app.slug, world.portal, permit=permit), 409,
            "permit_already_used")
    refused(return_code(world, RIVAL, permit=permit, handoff=rival_handoff(world)), 409,
            "permit_already_used")
    assert count(world, AuthCode) == codes
    assert count(world, AccountConnection) == 0
    assert count(world, Authorization) == 1
    # The user's own way to the same budget from another app: a proof bound to that app.
    budget = first.json()["summary"]["authorizationId"]
    proven = return_code(world, RIVAL, world.portal, ownerProof=sign_owner_proof(
        user, RIVAL, f"{world.portal}/{RIVAL}", budget))
    assert proven.status_code == 200, proven.text
    assert proven.json()["summary"]["authorizationId"] == budget


def test_a_permit_of_a_revoked_budget_stays_spent(world: PayWorld) -> None:
    user = wallet(1)
    permit = sign_permit(user, 1_000_000, nonce=0)
    assert return_code(world, world.app.slug, world.portal, permit=permit).status_code == 200
    with world.api(origin=world.portal) as api:
        revoked = api.post("/api/authorizations/revoke",
                           json={"permit": sign_permit(user, 0, nonce=1)})
    assert revoked.status_code == 200, revoked.text
    # No active budget left to compare with: the ledger's record of the wallet's nonces is
    # what refuses the old permit, and a new one at or below the revoke's nonce.
    refused(return_code(world, RIVAL, permit=permit), 409, "permit_already_used")
    refused(return_code(world, RIVAL, permit=sign_permit(user, 5_000, nonce=0)), 409,
            "permit_nonce_stale")
    refused(return_code(world, RIVAL, permit=sign_permit(user, 5_000, nonce=1)), 409,
            "permit_nonce_stale")
    with world.sessions() as session:
        assert session.scalars(select(Authorization.status)).all() == [
            AuthorizationStatus.REVOKED]
    renewed = return_code(world, world.app.slug, world.portal,
                          permit=sign_permit(user, 5_000, nonce=2))
    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["summary"]["remaining"] == "5000"


def test_other_spellings_of_a_recorded_signature_are_refused(world: PayWorld) -> None:
    user = wallet(1)
    permit = sign_permit(user, 1_000_000, nonce=0)
    assert return_code(world, world.app.slug, world.portal, permit=permit).status_code == 200
    with world.api(origin=world.portal) as api:
        assert api.post("/api/authorizations/revoke", json={
            "permit": sign_permit(user, 0, nonce=1)}).status_code == 200
    raw = permit["signature"][2:]
    r, s, v = raw[:64], int(raw[64:128], 16), int(raw[128:], 16)
    # (r, n - s) with the other recovery id signs the same message: valid for ecrecover,
    # refused by the token's ECDSA (EIP-2), and so by the ledger.
    high_s = f"0x{r}{SECP256K1_ORDER - s:064x}{(v ^ 1):02x}"
    refused(return_code(world, RIVAL, permit={**permit, "signature": high_s}), 422,
            "invalid_permit_signature")
    # v as 0/1 instead of 27/28: the same signature, written differently, so the same
    # permit.
    low_v = f"0x{r}{s:064x}{v - 27:02x}"
    refused(return_code(world, RIVAL, permit={**permit, "signature": low_v}), 409,
            "permit_already_used")
    assert count(world, Authorization) == 1


def test_a_failed_relay_leaves_its_nonce_to_the_next_permit(world: PayWorld) -> None:
    """The token never used a nonce whose relay failed: the wallet's next permit carries
    it again, and is accepted; the failed permit itself still counts as used."""
    user = wallet(1)
    permit = sign_permit(user, 1_000_000, nonce=0)
    assert return_code(world, world.app.slug, world.portal, permit=permit).status_code == 200
    with transaction(world.sessions) as session:
        session.execute(update(Authorization).values(
            relay_status=RelayStatus.FAILED, status=AuthorizationStatus.REVOKED))
    refused(return_code(world, world.app.slug, world.portal, permit=permit), 409,
            "permit_already_used")
    again = return_code(world, world.app.slug, world.portal,
                        permit=sign_permit(user, 500_000, nonce=0))
    assert again.status_code == 200, again.text
    assert again.json()["summary"]["remaining"] == "500000"
