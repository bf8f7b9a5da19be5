"""The typed backend client a developer's server calls with a ``zpk_`` key (spec 4.2-4.5,
5.1): orders, deliveries, receipts, account handoffs and trusted-server charges.

Separate from :class:`svc.client.DeveloperClient` on purpose: a CLI grant never goes
here and an API key never goes to the developer API (spec 5.3 item 4).

Failures are :class:`BackendError` (the service answered non-2xx; ``code`` is the spec's
identifier), :class:`ServiceUnreachable` (no answer, after the retries),
:class:`svc.proofs.ProofError` (a trusted charge whose ``paymentProof`` does not verify:
never grant) and :class:`AnswerError` (a 2xx that is not the service's answer). Retries
are safe: see :mod:`svc.backend_errors`.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any, TypeVar

import httpx

from svc import __version__
from svc.backend_calls import Call, new_idempotency_key
from svc.backend_calls import create_account_handoff as _handoff_call
from svc.backend_calls import create_order as _order_call
from svc.backend_calls import create_trusted_charge as _charge_call
from svc.backend_calls import get_delivery as _delivery_call
from svc.backend_calls import get_delivery_by_key as _delivery_by_key_call
from svc.backend_calls import get_order as _get_order_call
from svc.backend_calls import get_receipt as _receipt_call
from svc.backend_errors import (
    BackendError,
    RetryPolicy,
    error_from,
    retryable_transport_error,
    scrub,
)
from svc.backend_models import (
    STATUS_UNPROVEN,
    AnswerError,
    Connection,
    Delivery,
    Handoff,
    Order,
    Receipt,
    TrustedCharge,
)
from svc.client import DEFAULT_TIMEOUT, ServiceUnreachable
from svc.loopback import AsyncLoopbackNames, LoopbackNames
from svc.proofs import ProofError, verify_payment_proof
from svc.sent import AsyncRecorded, Recorded
from svc.trace import AsyncTraced, Traced

__all__ = [
    "STATUS_UNPROVEN", "AnswerError", "AsyncBackendClient", "BackendClient", "BackendError",
    "Connection", "Delivery", "Handoff", "Order", "ProofError", "Receipt", "RetryPolicy",
    "ServiceUnreachable", "TrustedCharge", "new_idempotency_key",
]

T = TypeVar("T")
KEY_PREFIX = "zpk_"


class _Backend:
    """What the sync and async clients share: the key, the URL, the policy, the reading
    of an answer. The key lives only here and in the HTTP client's headers."""

    def __init__(self, api_url: str, api_key: str, retries: int, max_retry_delay: float
                 ) -> None:
        if not isinstance(api_key, str) or not api_key.startswith(KEY_PREFIX):
            # Say what is wrong without repeating what was passed: it may be a secret.
            raise ValueError("api_key must be a backend zpk_ secret (svc keys create shows "
                             "it once).")
        if retries < 0:
            raise ValueError("retries must be 0 or more.")
        self.api_url = api_url.rstrip("/")
        self._key = api_key
        self.policy = RetryPolicy(retries=retries, max_delay=max_retry_delay)
        self.headers = {"user-agent": f"svc/{__version__}", "accept": "application/json",
                        "authorization": f"Bearer {api_key}"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(api_url={self.api_url!r}, api_key='zpk_…')"

    def verify_payment_proof(self, proof: Any) -> dict[str, Any]:
        """The ``paymentProof`` check with this client's key (spec 1.4 item 3): the signed
        payload, or :class:`ProofError`."""
        return verify_payment_proof(proof, self._key)

    def _answer(self, call: Call[T], response: httpx.Response) -> T:
        if not response.is_success:
            return self._refused(call, error_from(response, call.idempotency_key, self._key))
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise AnswerError(f"HTTP {response.status_code} from {response.request.url.host} "
                              "is not the service's JSON; is the API URL right?")
        return call.read(body)

    @staticmethod
    def _refused(call: Call[T], failure: BackendError) -> T:
        """A non-2xx raises, unless the call reads it as an answer (the lookup by key's
        "no delivery under this key")."""
        if call.refusal is None:
            raise failure
        return call.refusal(failure)

    def _unreachable(self, call: Call[Any], error: httpx.TransportError) -> ServiceUnreachable:
        failure = ServiceUnreachable(scrub(f"Could not reach {self.api_url}: "
                                           f"{error or type(error).__name__}", self._key))
        failure.idempotency_key = call.idempotency_key
        return failure

    def _order(self, product_id: str, developer_user_id: str, idempotency_key: str | None,
               amount_atomic: int | None) -> Call[Order]:
        return _order_call(product_id=product_id, developer_user_id=developer_user_id,
                           idempotency_key=idempotency_key, amount_atomic=amount_atomic)

    def _charge(self, product_id: str, developer_user_id: str | None,
                account_connection_id: str, idempotency_key: str | None,
                order_id: str | None) -> Call[TrustedCharge]:
        return _charge_call(product_id=product_id, developer_user_id=developer_user_id,
                            account_connection_id=account_connection_id,
                            idempotency_key=idempotency_key, order_id=order_id,
                            api_key=self._key)


class BackendClient(_Backend):
    """Synchronous client (``httpx.Client``); use it as a context manager or ``close()``."""

    def __init__(self, api_url: str, api_key: str, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = 2, transport: httpx.BaseTransport | None = None,
                 max_retry_delay: float = 5.0) -> None:
        super().__init__(api_url, api_key, retries, max_retry_delay)
        self._http = httpx.Client(headers=self.headers, timeout=timeout,
                                  transport=Traced(Recorded(LoopbackNames(transport))),
                                  follow_redirects=False)

    def __enter__(self) -> BackendClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._http.request(call.method, self.api_url + call.path,
                                              json=call.body)
            except httpx.TransportError as error:
                if attempt >= self.policy.retries or not retryable_transport_error(error):
                    raise self._unreachable(call, error) from error
            else:
                if response.is_success or attempt >= self.policy.retries:
                    return self._answer(call, response)
                failure = error_from(response, call.idempotency_key, self._key)
                if not failure.retryable:
                    return self._refused(call, failure)
            time.sleep(self.policy.delay(attempt, response))
            attempt += 1

    def create_order(self, *, product_id: str, developer_user_id: str,
                     idempotency_key: str | None = None,
                     amount_atomic: int | None = None) -> Order:
        """``POST /api/orders`` (scope ``orders:create``); ``amount_atomic`` for
        dynamic-priced products. Without a key one is made (``order.idempotency_key``)."""
        return self._send(self._order(product_id, developer_user_id, idempotency_key,
                                      amount_atomic))

    def get_order(self, order_id: str) -> Order:
        return self._send(_get_order_call(order_id))

    def get_delivery(self, delivery_id: str) -> Delivery:
        return self._send(_delivery_call(delivery_id))

    def reconcile_delivery(self, delivery_id: str) -> Delivery:
        """The trusted delivery lookup (spec 4.3) to grant from: grant once per
        ``delivery.id`` when ``delivery.grantable``."""
        return self._send(_delivery_call(delivery_id))

    def get_delivery_by_key(self, idempotency_key: str, *,
                            app: str | None = None) -> Delivery | None:
        """The delivery made under ``idempotency_key`` (the key as sent to the product route
        or ``create_trusted_charge``), or ``None``: the service holds none under it, so
        nothing was charged under it. ``app`` (id or slug) is required for an organization
        key. Any answer that does not say so raises, as other lookups do."""
        return self._send(_delivery_by_key_call(idempotency_key, app))

    def get_receipt(self, charge_id: str) -> Receipt:
        return self._send(_receipt_call(charge_id))

    def create_account_handoff(self, *, app_slug: str, merchant_user_id: str,
                               game_account_label: str, return_url: str,
                               email_hint: str | None = None,
                               wallet_hint: str | None = None) -> Handoff:
        return self._send(_handoff_call(
            app_slug=app_slug, merchant_user_id=merchant_user_id,
            game_account_label=game_account_label, return_url=return_url,
            email_hint=email_hint, wallet_hint=wallet_hint))

    def create_trusted_charge(self, *, product_id: str, account_connection_id: str,
                              developer_user_id: str | None = None,
                              idempotency_key: str | None = None,
                              order_id: str | None = None) -> TrustedCharge:
        """``POST /api/charges`` (scope ``charges:create``), its ``paymentProof`` verified
        with this client's key: a :class:`ProofError` means do not grant, and neither does
        a charge whose ``delivery.grantable`` is false (see :class:`TrustedCharge`).
        ``developer_user_id`` is the ``merchant_user_id`` the connection was made for,
        required unless ``order_id`` is given (the service refuses ``missing_field``)."""
        return self._send(self._charge(product_id, developer_user_id, account_connection_id,
                                       idempotency_key, order_id))

    # Spec 4.4's name for the helper (``createTrustedServerCharge``, SDK 0.2.12).
    create_trusted_server_charge = create_trusted_charge


class AsyncBackendClient(_Backend):
    """The same client on ``httpx.AsyncClient``: every call is awaitable."""

    def __init__(self, api_url: str, api_key: str, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = 2, transport: httpx.AsyncBaseTransport | None = None,
                 max_retry_delay: float = 5.0) -> None:
        super().__init__(api_url, api_key, retries, max_retry_delay)
        self._http = httpx.AsyncClient(headers=self.headers, timeout=timeout,
                                       transport=AsyncTraced(AsyncRecorded(
                                           AsyncLoopbackNames(transport))),
                                       follow_redirects=False)

    async def __aenter__(self) -> AsyncBackendClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = await self._http.request(call.method, self.api_url + call.path,
                                                    json=call.body)
            except httpx.TransportError as error:
                if attempt >= self.policy.retries or not retryable_transport_error(error):
                    raise self._unreachable(call, error) from error
            else:
                if response.is_success or attempt >= self.policy.retries:
                    return self._answer(call, response)
                failure = error_from(response, call.idempotency_key, self._key)
                if not failure.retryable:
                    return self._refused(call, failure)
            await asyncio.sleep(self.policy.delay(attempt, response))
            attempt += 1

    async def create_order(self, *, product_id: str, developer_user_id: str,
                           idempotency_key: str | None = None,
                           amount_atomic: int | None = None) -> Order:
        return await self._send(self._order(product_id, developer_user_id, idempotency_key,
                                            amount_atomic))

    async def get_order(self, order_id: str) -> Order:
        return await self._send(_get_order_call(order_id))

    async def get_delivery(self, delivery_id: str) -> Delivery:
        return await self._send(_delivery_call(delivery_id))

    async def reconcile_delivery(self, delivery_id: str) -> Delivery:
        return await self._send(_delivery_call(delivery_id))

    async def get_delivery_by_key(self, idempotency_key: str, *,
                                  app: str | None = None) -> Delivery | None:
        return await self._send(_delivery_by_key_call(idempotency_key, app))

    async def get_receipt(self, charge_id: str) -> Receipt:
        return await self._send(_receipt_call(charge_id))

    async def create_account_handoff(self, *, app_slug: str, merchant_user_id: str,
                                     game_account_label: str, return_url: str,
                                     email_hint: str | None = None,
                                     wallet_hint: str | None = None) -> Handoff:
        return await self._send(_handoff_call(
            app_slug=app_slug, merchant_user_id=merchant_user_id,
            game_account_label=game_account_label, return_url=return_url,
            email_hint=email_hint, wallet_hint=wallet_hint))

    async def create_trusted_charge(self, *, product_id: str, account_connection_id: str,
                                    developer_user_id: str | None = None,
                                    idempotency_key: str | None = None,
                                    order_id: str | None = None) -> TrustedCharge:
        return await self._send(self._charge(product_id, developer_user_id,
                                             account_connection_id, idempotency_key,
                                             order_id))

    create_trusted_server_charge = create_trusted_charge  # spec 4.4's name, as above
