"""Bad input on every ledger endpoint: always a 4xx in the ``{code, message}`` envelope,
never a 500, and never a side effect."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest
from eth_account import Account
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.developer.services import Limits
from payments.ledger.models import Authorization, Charge, Order
from payments.ledger.permits import permit_typed_data
from payments.models import DomainRequestStatus, RuntimeStatus
from payments.ratelimit import Limit
from tests.factories import update_app
from tests.ledger.flow import (
    PARAMS,
    PayWorld,
    build_world,
    sign_permit,
    start_handoff,
    wallet,
)
from tests.support.router import RouterFactory

Send = Callable[[httpx.Client], httpx.Response]
OVER_64_KB = 64 * 1024 + 100
# Digits to str.isdigit() but not numbers on our wire: int() refuses the first (that was a
# 500) and reads the second as 10000 (that was silently accepted).
SUPERSCRIPT_TWO = "\u00b2"
ARABIC_INDIC_10000 = "\u0661\u0660\u0660\u0660\u0660"


@dataclass(frozen=True)
class Case:
    name: str
    send: Send
    status: int | None = None  # None: any 4xx
    code: str | None = None


@pytest.fixture
def world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> Iterator[PayWorld]:
    # One client sends every case: the return-code limit (60/10 min per client, tested in
    # tests/portal/test_portal_limits.py) is raised so that each case meets its validation.
    limits = replace(Limits(), return_code=Limit("return-code", 100_000, 600))
    with start_router(app_options={"developer_overrides": {"limits": limits}}) as router:
        yield build_world(router, sessions)


def problem_with(response: httpx.Response, case: Case) -> str | None:
    if not 400 <= response.status_code < 500:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}, not JSON: {response.text[:200]}"
    if (not isinstance(body, dict) or not isinstance(body.get("code"), str)
            or not isinstance(body.get("message"), str) or not body["message"]):
        return f"no {{code, message}} envelope: {body}"
    if case.status is not None and response.status_code != case.status:
        return f"HTTP {response.status_code} (wanted {case.status}): {body}"
    if case.code is not None and body["code"] != case.code:
        return f"code {body['code']!r} (wanted {case.code!r}): {body['message']}"
    return None


def check(client: httpx.Client, cases: list[Case]) -> None:
    failures = []
    for case in cases:
        problem = problem_with(case.send(client), case)
        if problem:
            failures.append(f"{case.name}: {problem}")
    assert not failures, "\n".join(failures)


def post_json(path: str, body: Any, **headers: str) -> Send:
    return lambda client: client.post(path, json=body, headers=headers)


def post_raw(path: str, content: Any, content_type: str | None = "application/json",
             **headers: str) -> Send:
    if content_type is not None:
        headers = {"content-type": content_type, **headers}
    return lambda client: client.post(path, content=content, headers=headers)


def chunked(total: int) -> Iterator[bytes]:
    """A body without Content-Length: the server has to count while it reads.

    One chunk, so the whole body is on the wire before the server answers: a server that
    refuses mid-upload closes with unread bytes, and TCP then resets the connection
    before a slower client can read the 413.
    """
    yield b'{"pad": "' + b"x" * total + b'"}'


def body_cases(path: str, **headers: str) -> list[Case]:
    """What every JSON endpoint must refuse before it looks at a single field."""
    padded = json.dumps({"pad": "x" * OVER_64_KB}).encode()
    return [
        Case(f"{path} text/plain", post_raw(path, b"{}", "text/plain", **headers), 415,
             "unsupported_media_type"),
        Case(f"{path} no content-type", post_raw(path, b"{}", None, **headers), 415),
        Case(f"{path} form encoded", post_raw(path, b"a=1", "application/x-www-form-urlencoded",
                                              **headers), 415),
        Case(f"{path} malformed", post_raw(path, b'{"a": ', **headers), 400, "invalid_json"),
        Case(f"{path} empty", post_raw(path, b"", **headers), 400, "invalid_json"),
        Case(f"{path} not utf-8", post_raw(path, b'{"a": "\xff\xfe"}', **headers), 400,
             "invalid_json"),
        Case(f"{path} array", post_raw(path, b"[1, 2]", **headers), 400, "invalid_json"),
        Case(f"{path} string", post_raw(path, b'"hello"', **headers), 400, "invalid_json"),
        Case(f"{path} null", post_raw(path, b"null", **headers), 400, "invalid_json"),
        Case(f"{path} NaN", post_raw(path, b'{"a": NaN', **headers), 400, "invalid_json"),
        # valid JSON, but json.loads refuses integers of more than 4300 digits (a 500 once)
        Case(f"{path} 5000-digit number", post_raw(path, b'{"a": ' + b"9" * 5000 + b"}",
                                                   **headers), 400, "invalid_json"),
        Case(f"{path} > 64 KB", post_raw(path, padded, **headers), 413, "payload_too_large"),
        Case(f"{path} > 64 KB chunked", post_raw(path, chunked(OVER_64_KB), **headers), 413,
             "payload_too_large"),
        Case(f"{path} empty object", post_json(path, {}, **headers)),
    ]


def wrong_types(path: str, valid: dict[str, Any], fields: list[str],
                **headers: str) -> list[Case]:
    """Each string field of ``valid`` sent as a number, a list, an object, a bool, too long."""
    cases = []
    not_strings: tuple[Any, ...] = (5, 1.5, [], {"a": 1}, True, "x" * 5000)
    for name in fields:
        for bad in not_strings:
            cases.append(Case(f"{path} {name}={str(bad)[:12]!r}",
                              post_json(path, {**valid, name: bad}, **headers), 422))
        missing = {k: v for k, v in valid.items() if k != name}
        cases.append(Case(f"{path} without {name}", post_json(path, missing, **headers), 422))
    return cases


def without_origin(world: PayWorld, path: str, body: dict[str, Any]) -> httpx.Response:
    with world.api() as api:
        return api.post(path, json=body)


def count(world: PayWorld, model: type) -> int:
    with world.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def refused_return_urls(world: PayWorld) -> dict[str, str]:
    port = world.router.port
    runtime = world.router.settings.runtime_url(world.app.slug)
    return {
        "other host": "https://evil.example/game",
        "other slug on the portal": f"{world.portal}/other-game",
        "portal root": f"{world.portal}/",
        "portal deeper path": f"{world.portal}/game/extra",
        "userinfo": f"http://user:pw@portal.localhost:{port}/game",
        "user only": f"http://attacker@portal.localhost:{port}/game",
        "http on a public host": "http://game.example.com/game/return",
        "http on a private IP": "http://192.168.1.5:8000/game/return",
        "https localhost": "https://localhost:5173/game/return",
        "localhost without port": "http://localhost/game/return",
        "localhost other slug": "http://localhost:5173/other/return",
        "localhost bad port": "http://localhost:99999/game/return",
        "another app's runtime": runtime.replace("//game.", "//other."),
        "runtime with other scheme": runtime.replace("http://", "https://") + "/play",
        "fragment": f"{world.portal}/game#x",
        "backslash": f"{world.portal}\\@evil.example/game",
        "javascript": "javascript:alert(1)",
        "relative": "/game",
        "empty": "",
    }


# -- the product route --------------------------------------------------------------------


def test_product_route_refuses_bad_input(world: PayWorld) -> None:
    user = wallet(1)
    code = world.payment_code(world.authorize(user, 1_000_000)["code"], "retry")
    path = f"/api/pay/{world.app.slug}/retry"
    ok_headers = {"x-wallet-address": user.address, "x-svc-budget-spender": PARAMS.spender}
    valid: dict[str, Any] = {"authorizationCode": code, "developerUserId": "u",
                             "idempotencyKey": "k:1"}
    not_strings: tuple[Any, ...] = (5, [], {"a": 1})
    cases = body_cases(path, **ok_headers)
    cases += wrong_types(path, valid, ["authorizationCode", "idempotencyKey"], **ok_headers)
    cases += [Case(f"{path} {name}={bad!r}", post_json(path, {**valid, name: bad},
                                                       **ok_headers), 422)
              for name in ("developerUserId", "orderId", "accountConnectionId", "source")
              for bad in not_strings]
    cases += [
        Case("empty idempotencyKey", post_json(path, {**valid, "idempotencyKey": "  "},
                                               **ok_headers), 422, "invalid_idempotency_key"),
        Case("idempotencyKey with NUL", post_json(path, {**valid, "idempotencyKey": "k\x00"},
                                                  **ok_headers), 422, "invalid_idempotency_key"),
        Case("product slug with NUL", post_json(f"/api/pay/{world.app.slug}/re%00try", valid,
                                                **ok_headers), 404, "product_not_found"),
        Case("idempotencyKey of 201 chars", post_json(path, {**valid, "idempotencyKey":
                                                             "k" * 201}, **ok_headers), 422),
        Case("no headers", post_json(path, valid), 400, "invalid_headers"),
        Case("no x-wallet-address", post_json(path, valid, **{
            "x-svc-budget-spender": PARAMS.spender}), 400, "invalid_headers"),
        Case("no x-svc-budget-spender", post_json(path, valid, **{
            "x-wallet-address": user.address}), 400, "invalid_headers"),
        Case("short wallet", post_json(path, valid, **{**ok_headers,
                                                       "x-wallet-address": "0x1234"}), 400),
        Case("wallet not hex", post_json(path, valid, **{
            **ok_headers, "x-wallet-address": "0x" + "g" * 40}), 400),
        Case("spender with spaces", post_json(path, valid, **{
            **ok_headers, "x-svc-budget-spender": f"{PARAMS.spender} x"}), 400),
        Case("unknown app", post_json("/api/pay/no-such-app/retry", valid, **ok_headers),
             404, "app_not_found"),
        Case("invalid app slug", post_json("/api/pay/NOT_A_SLUG!/retry", valid, **ok_headers),
             404),
        Case("unknown product", post_json(f"/api/pay/{world.app.slug}/no-such-product", valid,
                                          **ok_headers), 404, "product_not_found"),
        Case("unknown code", post_json(path, {**valid, "authorizationCode": "pay_nope"},
                                       **ok_headers), 401, "AUTHORIZATION_CODE_INVALID"),
        Case("summary code instead of payment code", post_json(path, {
            **valid, "authorizationCode": world.authorize(wallet(2), 50_000)["code"]},
            **ok_headers), 401, "AUTHORIZATION_CODE_INVALID"),
        Case("GET", lambda client: client.get(path), 405),
    ]
    with world.api() as api:
        check(api, cases)
        # None of that consumed the code or charged anything.
        paid = world.pay(api, user, "retry", code, "k:1")
        assert paid.status_code == 201, paid.text
    assert count(world, Charge) == 1


# -- authorization endpoints ----------------------------------------------------------------


def permit_signed_for(account: Any, spender: str, value: int, nonce: int = 0) -> dict[str, Any]:
    """A correctly signed permit, but for another spender than BudgetSpenderV2."""
    deadline = int(time.time()) + 3600
    data = permit_typed_data(PARAMS, account.address, value, nonce, deadline)
    data["message"]["spender"] = spender
    signed = Account.sign_typed_data(account.key, full_message=data)
    return {"owner": account.address, "value": str(value), "nonce": nonce,
            "deadline": deadline, "signature": "0x" + signed.signature.hex().removeprefix("0x")}


def test_return_code_refuses_bad_input(world: PayWorld) -> None:
    user, other = wallet(1), wallet(2)
    path = "/api/authorizations/return-code"
    good_return = f"{world.portal}/{world.app.slug}"
    valid: dict[str, Any] = {"app": world.app.slug, "returnUrl": good_return,
                             "permit": sign_permit(user, 50_000)}

    def with_permit(**changes: Any) -> dict[str, Any]:
        return {**valid, "permit": {**valid["permit"], **changes}}

    forged = {**sign_permit(other, 50_000), "owner": user.address}
    cases = body_cases(path) + wrong_types(path, valid, ["app", "returnUrl"])
    cases += [Case(f"permit.{name}={bad!r}", post_json(path, with_permit(**{name: bad})), 422,
                   "invalid_permit")
              for name, bad in [("value", -1), ("value", "-1"), ("value", 1.5), ("value", "1.5"),
                                ("value", "1e6"), ("value", True), ("value", None),
                                ("value", "0x10"), ("nonce", -1), ("deadline", "soon"),
                                ("value", SUPERSCRIPT_TWO), ("value", ARABIC_INDIC_10000),
                                ("nonce", SUPERSCRIPT_TWO), ("deadline", ARABIC_INDIC_10000),
                                ("value", "1" * 5000), ("value", " 50000"), ("value", "5_0000"),
                                ("value", 2**256), ("signature", "0x00"),
                                ("signature", 5), ("signature", "0x" + "z" * 130)]]
    cases += [
        Case("permit not an object", post_json(path, {**valid, "permit": "signed"}), 422,
             "invalid_permit"),
        Case("permit owner not an address", post_json(path, with_permit(owner="me")), 422,
             "invalid_address"),
        Case("bad permit signature", post_json(path, {**valid, "permit": forged}), 422,
             "invalid_permit_signature"),
        Case("permit values changed after signing", post_json(path, with_permit(value="60000")),
             422, "invalid_permit_signature"),
        Case("permit for another spender", post_json(path, {**valid, "permit": permit_signed_for(
            user, "0x000000000000000000000000000000000000dEaD", 50_000)}), 422,
            "invalid_permit_signature"),
        Case("expired permit", post_json(path, {**valid, "permit": sign_permit(
            user, 50_000, deadline=int(time.time()) - 60)}), 422, "permit_expired"),
        Case("zero-value permit as a budget", post_json(path, {**valid, "permit": sign_permit(
            user, 0)}), 422, "invalid_permit"),
        Case("permit value beyond the ledger", post_json(path, {**valid, "permit": sign_permit(
            user, 2**256 - 1)}), 422, "invalid_permit"),
        Case("permit nonce beyond the ledger", post_json(path, {**valid, "permit": sign_permit(
            user, 50_000, nonce=2**255)}), 422, "invalid_permit"),
        # Valid on chain, but not kept exactly by the ledger: the relayer, which rebuilds
        # the permit from the ledger's row, could never send it (test_relayer_edges.py).
        Case("permit deadline beyond the ledger", post_json(path, {**valid, "permit": sign_permit(
            user, 50_000, deadline=2**256 - 1)}), 422, "invalid_permit"),
        Case("neither permit nor proof", post_json(path, {"app": world.app.slug,
                                                          "returnUrl": good_return}), 422),
        Case("permit and proof", post_json(path, {**valid, "ownerProof": {}}), 422),
        Case("proof not an object", post_json(path, {"app": world.app.slug, "returnUrl":
                                                     good_return, "ownerProof": "yes"}), 422),
        Case("proof missing fields", post_json(path, {"app": world.app.slug, "returnUrl":
                                                      good_return, "ownerProof": {
                                                          "owner": user.address}}), 422),
        Case("handoff not a string", post_json(path, {**valid, "handoff": 5}), 422),
        Case("handoff forged", post_json(path, {**valid, "handoff": "eyJhIjoxfQ.c2ln"}), 422,
             "handoff_invalid"),
        Case("handoff garbage", post_json(path, {**valid, "handoff": "...."}), 422,
             "handoff_invalid"),
        Case("unknown app", post_json(path, {**valid, "app": "no-such-app"}), 404,
             "app_not_found"),
        Case("invalid app slug", post_json(path, {**valid, "app": "../admin"}), 404),
        Case("runtime host before the runtime is active", post_json(path, {
            **valid, "returnUrl": world.router.settings.runtime_url(world.app.slug) + "/play"}),
            422, "return_url_runtime_inactive"),
    ]
    cases += [Case(f"return URL: {name}", post_json(path, {**valid, "returnUrl": url}), 422,
                   "return_url_not_allowed" if url else None)
              for name, url in refused_return_urls(world).items()]
    with world.api(origin=world.portal) as api:
        check(api, cases)
        assert count(world, Authorization) == 0  # nothing was recorded
        # The same permit with an allowed return URL is fine, and a local dev URL too.
        ok = api.post(path, json={**valid, "returnUrl": "http://localhost:5173/game/return"})
        assert ok.status_code == 200, ok.text
        assert ok.json()["redirectUrl"].startswith("http://localhost:5173/game/return?code=")


def test_runtime_return_url_is_accepted_once_served(world: PayWorld) -> None:
    runtime = world.router.settings.runtime_url(world.app.slug)
    body = {"app": world.app.slug, "returnUrl": f"{runtime}/svc-auth-return?app=game",
            "permit": sign_permit(wallet(1), 50_000)}
    with world.api(origin=world.portal) as api:
        early = api.post("/api/authorizations/return-code", json=body)
        assert early.status_code == 422
        assert early.json()["code"] == "return_url_runtime_inactive"
        update_app(world.sessions, world.app.slug, runtime_status=RuntimeStatus.ACTIVE,
                   runtime_origin="https://game.example.com",
                   runtime_domain_request_status=DomainRequestStatus.PENDING_MANUAL_DNS)
        # Verified but the domain not yet approved: the host does not serve it yet.
        unapproved = api.post("/api/authorizations/return-code", json=body)
        assert unapproved.json()["code"] == "return_url_runtime_inactive"
        update_app(world.sessions, world.app.slug,
                   runtime_domain_request_status=DomainRequestStatus.APPROVED)
        late = api.post("/api/authorizations/return-code", json=body)
        assert late.status_code == 200, late.text
        assert late.json()["summary"]["app"]["slug"] == "game"


def test_summary_payment_code_and_revoke_refuse_bad_input(world: PayWorld) -> None:
    user = wallet(1)
    summary = world.authorize(user, 100_000)["code"]
    exchange = "/api/authorizations/payment-code"
    valid = {"authorizationCode": summary, "paymentUrl": world.payment_url("retry"),
             "developerUserId": "u"}
    origin = {"origin": world.audience}
    base = world.router.settings.base_url
    cases = body_cases(exchange, **origin)
    cases += wrong_types(exchange, valid, ["authorizationCode", "paymentUrl"], **origin)
    cases += [Case(f"{exchange} {name}=5", post_json(exchange, {**valid, name: 5}, **origin), 422)
              for name in ("orderId", "accountConnectionId", "developerUserId",
                           "idempotencyKey")]
    cases += [
        Case("unknown summary code", post_json(exchange, {**valid, "authorizationCode":
                                                          "sum_nope"}, **origin), 401,
             "AUTHORIZATION_CODE_INVALID"),
        Case("paymentUrl of another app", post_json(exchange, {
            **valid, "paymentUrl": f"{base}/api/pay/other/retry"}, **origin), 409,
            "AUTHORIZATION_CODE_INTENT_MISMATCH"),
        Case("paymentUrl of an unknown product", post_json(exchange, {
            **valid, "paymentUrl": world.payment_url("nope")}, **origin), 409,
            "AUTHORIZATION_CODE_INTENT_MISMATCH"),
        Case("paymentUrl on another host", post_json(exchange, {
            **valid, "paymentUrl": "https://evil.example/api/pay/game/retry"}, **origin), 409,
            "AUTHORIZATION_CODE_INTENT_MISMATCH"),
        Case("unknown order", post_json(exchange, {**valid, "orderId": "zord_nope"}, **origin),
             409, "AUTHORIZATION_CODE_INTENT_MISMATCH"),
        Case("connection the summary does not carry", post_json(exchange, {
            **valid, "accountConnectionId": "zconn_nope"}, **origin), 409,
            "ACCOUNT_CONNECTION_MISMATCH"),
        Case("no Origin", lambda c: without_origin(world, exchange, valid), 403,
             "PAYMENT_CODE_ORIGIN_REQUIRED"),
        Case("summary without code", lambda c: c.get("/api/authorizations/summary"), 401,
             "AUTHORIZATION_CODE_INVALID"),
        Case("summary with unknown code", lambda c: c.get("/api/authorizations/summary",
                                                          params={"code": "sum_x" * 900}), 401),
        Case("summary with a payment code", lambda c: c.get(
            "/api/authorizations/summary", params={"code": world.payment_code(summary, "retry")}),
            401),
    ]
    revoke = "/api/authorizations/revoke"
    forged = {**sign_permit(wallet(2), 0, nonce=1), "owner": user.address}
    cases += body_cases(revoke)
    cases += [
        Case("revoke without permit", post_json(revoke, {}), 422, "invalid_permit"),
        Case("revoke with a budget permit", post_json(revoke, {
            "permit": sign_permit(user, 5, nonce=1)}), 422, "invalid_permit"),
        Case("revoke with a forged permit", post_json(revoke, {"permit": forged}), 422,
             "invalid_permit_signature"),
        Case("revoke with a stale nonce", post_json(revoke, {
            "permit": sign_permit(user, 0, nonce=0)}), 409, "permit_nonce_stale"),
        Case("revoke with a nonce beyond the ledger", post_json(revoke, {
            "permit": sign_permit(user, 0, nonce=2**200)}), 422, "invalid_permit"),
        Case("revoke with a deadline beyond the ledger", post_json(revoke, {
            "permit": sign_permit(user, 0, nonce=1, deadline=2**256 - 1)}), 422,
            "invalid_permit"),
        Case("revoke a wallet without budget", post_json(revoke, {
            "permit": sign_permit(wallet(3), 0, nonce=1)}), 404, "no_active_budget"),
    ]
    with world.api(origin=world.audience) as api:
        check(api, cases)
        still = api.get("/api/authorizations/summary", params={"code": summary}).json()
        assert still["status"] == "active" and still["remaining"] == "100000"


# -- backend endpoints ------------------------------------------------------------------------


def test_orders_refuse_bad_input(world: PayWorld) -> None:
    path = "/api/orders"
    tip, retry = world.products["tip"].id, world.products["retry"].id
    valid: dict[str, Any] = {"productId": tip, "developerUserId": "u", "idempotencyKey": "o:1",
                             "amountAtomic": "20000"}
    bad_amounts: tuple[Any, ...] = (
        -5, "-5", 1.5, "1.5", 20000.0, "20000.0", "1e6", "abc", "", " 20000", True, [],
        {"v": 1}, 2**70, "9" * 40, 0, "0", 9_999, 10_000_001, SUPERSCRIPT_TWO,
        ARABIC_INDIC_10000, "2_0000", "+20000")
    cases = body_cases(path) + wrong_types(path, valid, ["productId", "developerUserId"])
    cases += [Case(f"amountAtomic={bad!r}", post_json(path, {**valid, "amountAtomic": bad}), 422,
                   "invalid_amount")
              for bad in bad_amounts]
    cases += [
        Case("idempotencyKey missing", post_json(path, {k: v for k, v in valid.items()
                                                        if k != "idempotencyKey"}), 422),
        Case("idempotencyKey a number", post_json(path, {**valid, "idempotencyKey": 7}), 422),
        Case("developerUserId empty", post_json(path, {**valid, "developerUserId": ""}), 422,
             "invalid_field"),
        Case("developerUserId blank", post_json(path, {**valid, "developerUserId": "  "}), 422,
             "invalid_field"),
        Case("dynamic product without amount", post_json(path, {
            k: v for k, v in valid.items() if k != "amountAtomic"}), 422, "missing_field"),
        Case("fixed product with another amount", post_json(path, {
            **valid, "productId": retry, "amountAtomic": "5"}), 422, "invalid_amount"),
        Case("unknown product", post_json(path, {**valid, "productId": "zprod_nope"}), 404),
        Case("GET the collection", lambda c: c.get(path), 405),
        Case("unknown order", lambda c: c.get("/api/orders/zord_nope"), 404, "not_found"),
    ]
    with world.keyed() as backend:
        check(backend, cases)
    assert count(world, Order) == 0


def test_handoffs_and_charges_refuse_bad_input(world: PayWorld) -> None:
    handoffs = "/api/account-handoffs"
    valid = {"appSlug": world.app.slug, "merchantUserId": "m-1", "gameAccountLabel": "P1",
             "returnUrl": f"{world.portal}/{world.app.slug}"}
    cases = body_cases(handoffs)
    cases += wrong_types(handoffs, valid, ["appSlug", "merchantUserId", "returnUrl"])
    cases += [Case(f"{handoffs} {name}={bad!r}", post_json(handoffs, {**valid, name: bad}), 422)
              for name in ("gameAccountLabel", "emailHint", "walletHint")
              for bad in (5, ["a"], "x" * 400)]
    cases += [
        Case("unknown app", post_json(handoffs, {**valid, "appSlug": "no-such-app"}), 404),
        Case("runtime host before active", post_json(handoffs, {
            **valid, "returnUrl": world.router.settings.runtime_url("game") + "/"}), 422,
            "return_url_runtime_inactive"),
    ]
    cases += [Case(f"handoff return URL: {name}", post_json(handoffs, {**valid, "returnUrl": url}),
                   422) for name, url in refused_return_urls(world).items()]
    charges = "/api/charges"
    charge = {"productId": world.products["legendary"].id, "accountConnectionId": "zconn_x",
              "idempotencyKey": "c:1", "developerUserId": "u"}
    cases += body_cases(charges)
    cases += wrong_types(charges, charge, ["productId", "accountConnectionId"])
    cases += [
        Case("charge idempotencyKey a number", post_json(charges, {**charge,
                                                                   "idempotencyKey": 1}), 422),
        Case("charge orderId a list", post_json(charges, {**charge, "orderId": []}), 422),
        Case("charge unknown product", post_json(charges, {**charge,
                                                           "productId": "zprod_nope"}), 404),
        Case("charge unknown connection", post_json(charges, charge), 409,
             "ACCOUNT_CONNECTION_MISMATCH"),
    ]
    with world.keyed() as backend:
        check(backend, cases)
    assert start_handoff(world, "m-1").status_code == 200  # the valid body is fine
    assert count(world, Charge) == 0


def test_lookups_refuse_bad_ids(world: PayWorld) -> None:
    def get(path: str) -> Send:
        return lambda client: client.get(path)

    cases = [Case(f"GET {path}", get(path), 404, "not_found") for path in (
        "/api/deliveries/ztdlv_nope", "/api/deliveries/%00", "/api/orders/zord_%00",
        "/api/orders/" + "z" * 3000,
        "/api/receipts/nope", "/api/receipts/0x" + "0" * 64, "/api/receipts/0x" + "z" * 64,
        "/api/receipts/0x" + "f" * 64, "/api/receipts/0x" + "8" + "0" * 63,
        "/api/receipts/0x" + "0" * 48 + "8" + "0" * 15, "/api/receipts/-0x1")]
    with world.keyed() as backend:
        check(backend, cases)


def test_a_receipt_answers_only_to_its_exact_charge_id(world: PayWorld) -> None:
    """``int(x, 16)`` reads "_", spaces and upper case too: one charge had many ids."""
    user = wallet(5)
    summary = world.authorize(user, 100_000)["code"]
    with world.api(origin=world.audience) as api:
        paid = world.pay(api, user, "retry", world.payment_code(summary, "retry"), "r:1")
    assert paid.status_code == 201, paid.text
    charge = paid.json()["chargeId"]
    digits = charge[2:].lstrip("0")
    aliases = ["0x" + "0" * (62 - len(digits)) + "0_" + digits,  # 66 characters, as the id
               "0x" + " " * (64 - len(digits)) + digits,
               "0x+" + "0" * (63 - len(digits)) + digits, "0X" + charge[2:]]
    with world.keyed() as backend:
        assert backend.get(f"/api/receipts/{charge}").status_code == 200
        check(backend, [Case(f"receipt of {alias!r}", (lambda a: lambda c: c.get(
            f"/api/receipts/{a}"))(alias), 404, "not_found") for alias in aliases])


def test_deeply_nested_json_is_a_400(world: PayWorld) -> None:
    nested = b"[" * 30_000 + b"]" * 30_000  # under 64 KB
    with world.keyed() as api:
        response = api.post("/api/orders", content=nested,
                            headers={"content-type": "application/json"})
    assert problem_with(response, Case("nested", lambda c: response, 400)) is None


def test_nul_in_body_strings_is_never_a_500(world: PayWorld) -> None:
    """PostgreSQL text cannot hold NUL, so it is refused up front on both backends."""
    user = wallet(1)
    summary = world.authorize(user, 100_000)["code"]
    code = world.payment_code(summary, "retry")
    pay = f"/api/pay/{world.app.slug}/retry"
    headers = {"x-wallet-address": user.address, "x-svc-budget-spender": PARAMS.spender}
    key = {"authorization": f"Bearer {world.api_key}"}
    retry = world.products["retry"].id
    sends = {
        "pay developerUserId": post_json(pay, {"authorizationCode": code, "idempotencyKey": "k1",
                                               "developerUserId": "u\x00"}, **headers),
        "payment-code orderId": post_json("/api/authorizations/payment-code", {
            "authorizationCode": summary, "paymentUrl": world.payment_url("retry"),
            "orderId": "zord_\x00"}, origin=world.audience),
        "order developerUserId": post_json("/api/orders", {
            "productId": retry, "developerUserId": "u\x00", "idempotencyKey": "k"}, **key),
        "order productId": post_json("/api/orders", {
            "productId": "zprod_\x00", "developerUserId": "u", "idempotencyKey": "k2"}, **key),
        "charge accountConnectionId": post_json("/api/charges", {
            "productId": retry, "accountConnectionId": "c\x00", "idempotencyKey": "k"}, **key),
    }
    with world.api() as api:
        failures = [f"{name}: HTTP {response.status_code}"
                    for name, send in sends.items()
                    if (response := send(api)).status_code != 422]
    assert not failures, failures


def test_browser_endpoint_errors_are_readable_by_app_origins(world: PayWorld) -> None:
    """The recovery flow (spec 4.9) must see AUTHORIZATION_CODE_CONSUMED, not a CORS wall."""
    user = wallet(3)
    summary = world.authorize(user, 100_000)["code"]
    code = world.payment_code(summary, "retry")
    with world.api(origin=world.audience) as api:
        assert world.pay(api, user, "retry", code, "cors:1").status_code == 201
        consumed = world.pay(api, user, "retry", code, "cors:2")
        assert consumed.json()["code"] == "AUTHORIZATION_CODE_CONSUMED"
        assert consumed.headers["access-control-allow-origin"] == world.audience
    with world.api(origin="https://evil.example") as api:
        refused = world.pay(api, user, "retry", code, "cors:3")
        assert refused.status_code == 409
        assert "access-control-allow-origin" not in refused.headers


def test_a_delivery_key_is_never_reused_across_payment_paths(world: PayWorld) -> None:
    user = wallet(4)
    summary = world.authorize(user, 100_000)["code"]
    with world.api(origin=world.audience) as api:
        first = world.pay(api, user, "retry", world.payment_code(summary, "retry"), "same-key")
        assert first.status_code == 201
        # the pay scope's record answers replays; another request under the key is refused
        other = world.pay(api, user, "unlock-level", world.payment_code(summary, "unlock-level"),
                          "same-key")
        assert other.status_code == 409
        assert other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"


def test_a_missing_or_wrong_key_is_refused_before_the_body_is_judged(world: PayWorld) -> None:
    """401 whatever the body: a caller without a valid key learns nothing of the fields an
    endpoint expects, and gets the error they can act on."""
    bodies: list[tuple[str, Send]] = []
    for path in ("/api/orders", "/api/account-handoffs", "/api/charges"):
        bodies += [(f"{path} empty JSON", post_json(path, {})),
                   (f"{path} wrong types", post_json(path, {"productId": 5, "appSlug": []})),
                   (f"{path} not JSON", post_raw(path, b"{", "application/json")),
                   (f"{path} text/plain", post_raw(path, b"hello", "text/plain")),
                   (f"{path} over 64 KB", post_raw(path, b'{"p": "' + b"x" * OVER_64_KB
                                                   + b'"}'))]
    cases = [Case(f"{who}: {name}", send, 401, "valid_api_key_required")
             for name, send in bodies for who in ("no key", "wrong key")]
    with world.api() as anonymous, world.api(authorization="Bearer zpk_" + "0" * 40) as wrong:
        failures = [f"{case.name}: {problem}" for case in cases
                    if (problem := problem_with(case.send(
                        anonymous if case.name.startswith("no key") else wrong), case))]
    assert not failures, "\n".join(failures)
    assert count(world, Order) == 0 and count(world, Charge) == 0
