"""A ledger on SQLite (or PostgreSQL) wired to a fresh in-process chain.

Charges are recorded by the ledger's own code (``authorize_permit``, ``record_charge``)
from permits that wallets really sign; the chain workers then take it from there.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.chain.allowed_recipients import set_allowed_recipient
from payments.chain.batching import BatchPolicy
from payments.chain.checkpoints import Checkpoint, no_checkpoint
from payments.chain.in_process import DEPLOYER_KEY, InProcessChain
from payments.chain.relayer import Relayer
from payments.chain.settlement import SettlementWorker
from payments.chain.web3_chain import Web3Chain
from payments.db import transaction, utcnow
from payments.ledger.authorizations import active_authorization, authorize_permit, revoke
from payments.ledger.charges import ChargeIntent, record_charge
from payments.ledger.models import (
    Authorization,
    Charge,
    Delivery,
    RelayStatus,
    SettlementStatus,
    WebhookEvent,
)
from payments.ledger.permits import parse_permit, permit_typed_data
from payments.models import AllowlistStatus, App, Product, RiskMode
from payments.products import create_product
from tests.factories import add_app

FUNDS = 100_000_000  # 100 test USDC per wallet
FAST = BatchPolicy(max_age=timedelta(0), unsent_grace=timedelta(0), receipt_timeout=5.0)


class Crash(Exception):
    """A simulated process death at a named step."""


def crash_at(step: str) -> Checkpoint:
    def checkpoint(point: str) -> None:
        if point == step:
            raise Crash(point)
    return checkpoint


def wallet(index: int) -> LocalAccount:
    account: LocalAccount = Account.from_key(keccak(text=f"chain-world-user-{index}"))
    return account


def recipient(index: int) -> str:
    return str(Account.from_key(keccak(text=f"chain-world-app-{index}")).address)


@dataclass
class World:
    sessions: sessionmaker[Session]
    chain: Web3Chain
    owner_key: bytes = DEPLOYER_KEY  # owns the contracts (allowlist, test USDC mint)
    apps: dict[str, App] = field(default_factory=dict)
    products: dict[tuple[str, str], Product] = field(default_factory=dict)
    _keys: itertools.count[int] = field(default_factory=itertools.count)

    # -- setup ---------------------------------------------------------------------------

    def add_app(self, slug: str, pay_to: str, *, allowlisted: bool = True) -> App:
        status = AllowlistStatus.ALLOWED if allowlisted else AllowlistStatus.NOT_ALLOWED
        app = add_app(self.sessions, slug, pay_to=pay_to, recipient_allowlist_status=status)
        if allowlisted:
            self.allow(pay_to, True)
        with transaction(self.sessions) as session:
            attached = session.get(App, app.id)
            assert attached is not None
            for spec in ({"template": "retry_continue"},
                         {"slug": "sword", "name": "Sword", "priceAtomic": "100000",
                          "riskMode": RiskMode.SETTLED_FIRST.value}):
                product = create_product(session, attached, spec)
                self.products[(slug, product.slug)] = product
        self.apps[slug] = app
        return app

    @property
    def evm(self) -> InProcessChain:
        """The in-process chain, for what only it can do (mine, fund gas, add relayers)."""
        assert isinstance(self.chain, InProcessChain)
        return self.chain

    def allow(self, pay_to: str, allowed: bool) -> None:
        set_allowed_recipient(self.chain, self.owner_key.hex(), pay_to, allowed)

    def faucet(self, address: str, amount: int = FUNDS) -> None:
        self.chain.transact_as(self.owner_key, self.chain.token.functions.mint(address, amount))

    def sign_permit(self, user: LocalAccount, value: int, *, nonce: int | None = None,
                    deadline: int | None = None) -> dict[str, Any]:
        nonce = self.chain.permit_nonce(user.address) if nonce is None else nonce
        deadline = deadline or int(time.time()) + 86_400
        data = permit_typed_data(self.chain.params, user.address, value, nonce, deadline)
        signed = Account.sign_typed_data(user.key, full_message=data)
        return {"owner": user.address, "value": value, "nonce": nonce, "deadline": deadline,
                "signature": "0x" + signed.signature.hex().removeprefix("0x")}

    def authorize(self, user: LocalAccount, value: int = 1_000_000, *, fund: bool = True,
                  nonce: int | None = None) -> str:
        """The ledger side of the portal's return-code call: a pending budget."""
        if fund:
            self.faucet(user.address)
        permit = parse_permit(self.sign_permit(user, value, nonce=nonce))
        with transaction(self.sessions) as session:
            return authorize_permit(session, self.chain.params, permit, utcnow()).id

    def revoke(self, user: LocalAccount, nonce: int) -> None:
        """The ledger side of ``POST /api/authorizations/revoke``."""
        permit = parse_permit(self.sign_permit(user, 0, nonce=nonce))
        with transaction(self.sessions) as session:
            authorization = active_authorization(session, permit.owner, self.chain.params.spender)
            assert authorization is not None
            revoke(authorization, utcnow())
            authorization.revoke_relay_status = RelayStatus.PENDING
            authorization.revoke_signature = permit.signature
            authorization.revoke_nonce = permit.nonce
            authorization.revoke_deadline = permit.deadline_at

    def charge(self, user: LocalAccount, app: str = "game", product: str = "retry", *,
               budget: str | None = None) -> int:
        """A paid action recorded by the ledger (what the product route does), on the
        wallet's active budget or on ``budget`` (a payment code issued before it changed)."""
        with transaction(self.sessions) as session:
            app_row = session.get(App, self.apps[app].id)
            product_row = session.get(Product, self.products[(app, product)].id)
            authorization = (active_authorization(session, user.address,
                                                  self.chain.params.spender)
                             if budget is None else session.get(Authorization, budget))
            assert app_row is not None and product_row is not None and authorization
            recorded = record_charge(session, ChargeIntent(
                app=app_row, product=product_row, authorization=authorization,
                amount=product_row.price_atomic, order=None, developer_user_id="player",
                idempotency_key=f"k{next(self._keys)}", source="product_route"),
                self.chain.params, utcnow())
            return recorded.charge.seq

    # -- workers -------------------------------------------------------------------------

    def relayer(self, checkpoint: Checkpoint = no_checkpoint, *,
                clock: Callable[[], datetime] = utcnow) -> Relayer:
        """The relayer as the worker cycle builds it for ``FAST`` (its hold included)."""
        return Relayer(self.sessions, self.chain, checkpoint=checkpoint, clock=clock,
                       receipt_timeout=5.0, hold=FAST.relay_hold)

    def late_relayer(self) -> Relayer:
        """A relayer whose revokes waited past their hold: it sends them whatever charges
        accepted before them still wait (how those charges then fail on chain)."""
        later = utcnow() + FAST.relay_hold + timedelta(minutes=1)
        return self.relayer(clock=lambda: later)

    def worker(self, checkpoint: Checkpoint = no_checkpoint,
               policy: BatchPolicy = FAST) -> SettlementWorker:
        return SettlementWorker(self.sessions, self.chain, policy=policy, checkpoint=checkpoint)

    def settle(self, rounds: int = 3) -> None:
        """Relay, then run the worker until nothing is left to do."""
        self.relayer().run_once()
        worker = self.worker()
        for _ in range(rounds):
            worker.run_once()

    # -- reads ---------------------------------------------------------------------------

    def charges(self) -> dict[int, Charge]:
        with self.sessions() as session:
            return {c.seq: c for c in session.scalars(select(Charge))}

    def statuses(self) -> dict[int, SettlementStatus]:
        return {seq: c.settlement_status for seq, c in self.charges().items()}

    def delivery(self, seq: int) -> Delivery:
        with self.sessions() as session:
            found = session.scalar(select(Delivery).where(Delivery.charge_seq == seq))
            assert found is not None
            return found

    def authorization(self, authorization_id: str) -> Authorization:
        with self.sessions() as session:
            found = session.get(Authorization, authorization_id)
            assert found is not None
            return found

    def events(self, event_type: str) -> dict[int, int]:
        """charge seq -> how many events of ``event_type`` name it."""
        with self.sessions() as session:
            rows = session.execute(
                select(Delivery.charge_seq, func.count(WebhookEvent.id))
                .join(WebhookEvent, WebhookEvent.delivery_id == Delivery.id)
                .where(WebhookEvent.type == event_type).group_by(Delivery.charge_seq)).all()
        return {int(seq): int(count) for seq, count in rows}

    def balance(self, address: str) -> int:
        return int(self.chain.token.functions.balanceOf(address).call())
