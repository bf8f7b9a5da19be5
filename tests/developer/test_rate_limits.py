"""Rate limits on key management, CLI grant approval and CLI sign-in requests (spec 8 item 2):
hit, then lifted once the window has passed.

A frozen clock drives the services and the in-process limiter, so ``Retry-After`` is exact
and the limit lifts at the very second the window ends. One test runs the Redis limiter the
way production wires it (``redis_url``), on the Redis server's clock and a one-second window.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
import pytest
import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer import grants
from payments.developer.models import ApiKey, CliAuthRequest
from payments.developer.services import Limits
from payments.models import App
from payments.ratelimit import InMemoryRateLimiter, Limit
from tests.factories import add_developer, add_owned_app, open_console_session
from tests.router.conftest import RouterFactory, RunningRouter

KEYS = Limits(key_management=Limit("key-management", 3, 60))
APPROVALS = Limits(grant_approval=Limit("grant-approval", 2, 300))  # < a request's 10 min
SIGN_INS = Limits(cli_request=Limit("cli-request", 2, 600))
LOOKUPS = Limits(grant_lookup=Limit("grant-lookup", 2, 300))


class FrozenClock:
    """Time that moves only when the test moves it."""

    def __init__(self) -> None:
        self._start = utcnow()
        self._offset = 0.0

    def advance(self, seconds: float) -> None:
        self._offset += seconds

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._offset)

    def monotonic(self) -> float:
        return self._offset


@dataclass
class World:
    router: RunningRouter
    sessions: sessionmaker[Session]
    developer_id: str
    app: App
    clock: FrozenClock

    def api(self, token: str | None = None) -> httpx.Client:
        return self.router.api(token)

    def console(self) -> tuple[httpx.Client, str]:
        """A signed-in console client (JSON calls carry the CSRF header) and its CSRF token."""
        cookie, csrf = open_console_session(self.sessions, self.developer_id)
        return httpx.Client(base_url=self.router.url, timeout=10, follow_redirects=False,
                            headers={"host": f"console.localhost:{self.router.port}",
                                     "x-csrf-token": csrf,
                                     "cookie": f"svc_console={cookie}"}), csrf

    def grant(self, scopes: list[str]) -> str:
        """A CLI grant made in the database, so that it spends none of the limits."""
        now = utcnow()
        with transaction(self.sessions) as session:
            started = grants.start_request(session, app_slug=self.app.slug, scopes=scopes,
                                           ttl_seconds=None, now=now)
            grants.approve(started.record, developer_id=self.developer_id, app=self.app)
            return grants.redeem(session, started.device_code, now).token


WorldFactory = Callable[[Limits], AbstractContextManager[World]]


@pytest.fixture
def start_world(start_router: RouterFactory, sessions: sessionmaker[Session]) -> WorldFactory:
    """``with start_world(limits) as world:`` a router with these limits and a frozen clock."""
    developer_id, org_id = add_developer(sessions)
    app = add_owned_app(sessions, org_id, "game")

    @contextmanager
    def start(limits: Limits) -> Iterator[World]:
        clock = FrozenClock()
        limiter = InMemoryRateLimiter(clock=clock.monotonic)
        overrides = {"limits": limits, "clock": clock.now, "limiter": lambda: limiter}
        with start_router(app_options={"developer_overrides": overrides}) as router:
            yield World(router, sessions, developer_id, app, clock)
    return start


# What each limit says, word for word; ``assert_limited`` adds the "Retry in" sentence.
SAYS = {
    "key-management": "Too many key-management requests: at most 3 requests per 60 seconds.",
    "grant-approval": "Too many grant-approval requests: at most 2 requests per 300 seconds.",
    "cli-request": "Too many cli-request requests: at most 2 requests per 600 seconds.",
    "grant-lookup": "Too many grant-lookup requests: at most 2 requests per 300 seconds.",
}


def _envelope(says: str, retry_after: int) -> dict[str, object]:
    retry = "Retry in 1 second." if retry_after == 1 else f"Retry in {retry_after} seconds."
    return {"code": "rate_limited", "message": f"{says} {retry}", "retryAfter": retry_after}


def assert_limited(response: httpx.Response, limit: Limit, retry_after: int,
                   says: str | None = None) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == str(retry_after)
    assert response.json() == _envelope(says or SAYS[limit.name], retry_after)


def assert_limited_page(response: httpx.Response, limit: Limit, retry_after: int) -> None:
    """The console shows the same error on the form's page, with the same status and header."""
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == str(retry_after)
    assert response.headers["content-type"].startswith("text/html")
    assert "<code>rate_limited</code> · HTTP 429" in response.text
    assert str(_envelope(SAYS[limit.name], retry_after)["message"]) in response.text


def _key_count(sessions: sessionmaker[Session], *, revoked: bool) -> int:
    with sessions() as session:
        found = select(func.count()).select_from(ApiKey).where(
            ApiKey.revoked_at.is_not(None) if revoked else ApiKey.revoked_at.is_(None))
        return session.scalar(found) or 0


def test_key_management_limit_on_the_developer_api(start_world: WorldFactory) -> None:
    """Creating and revoking keys share one budget per developer; a refused call does
    nothing."""
    limit = KEYS.key_management
    keys = "/api/developer/apps/game/keys"
    body = {"label": "backend", "scopes": ["orders:create"]}
    with start_world(KEYS) as world, world.api(world.grant(["apps:read", "keys:create"])) as api:
        first, second = (api.post(keys, json=body) for _ in range(2))
        assert (first.status_code, second.status_code) == (201, 201)
        first_id, second_id = first.json()["key"]["id"], second.json()["key"]["id"]
        assert api.post(f"{keys}/{first_id}/revoke").status_code == 200

        assert_limited(api.post(keys, json=body), limit, 60)
        assert_limited(api.post(f"{keys}/{second_id}/revoke"), limit, 60)
        assert _key_count(world.sessions, revoked=False) == 1  # second, still live
        world.clock.advance(45)
        assert_limited(api.post(keys, json=body), limit, 15)
        world.clock.advance(14)
        assert_limited(api.post(f"{keys}/{second_id}/revoke"), limit, 1)

        world.clock.advance(1)  # the window of the first three hits has passed
        lifted = api.post(f"{keys}/{second_id}/revoke")
        assert lifted.status_code == 200 and lifted.json()["key"]["revokedAt"] is not None
        assert [api.post(keys, json=body).status_code for _ in range(2)] == [201, 201]
        assert_limited(api.post(keys, json=body), limit, 60)  # a new window from the lift
    assert _key_count(world.sessions, revoked=True) == 2
    assert _key_count(world.sessions, revoked=False) == 2


def test_only_authenticated_calls_count_and_each_developer_has_a_budget(
        start_world: WorldFactory) -> None:
    """Counted after authentication, per account: calls without valid credentials get their
    401 and use up nothing, and another developer at the same address keeps a full budget.
    (Counted per address before authentication, the anonymous calls below would have
    locked the developer out.)"""
    limit = KEYS.key_management
    keys = "/api/developer/apps/game/keys"
    body = {"label": "backend", "scopes": ["orders:create"]}
    with start_world(KEYS) as world:
        other_developer, other_org = add_developer(world.sessions, "dev2")
        add_owned_app(world.sessions, other_org, "other")
        with world.api() as anonymous, world.api("zcli_" + "x" * 40) as forged:
            for client in (anonymous, forged):
                for _ in range(KEYS.key_management.max_hits + 1):
                    answered = client.post(keys, json=body)
                    assert answered.status_code == 401, answered.text
                    assert answered.json()["code"] == "developer_auth_required"
        with world.api(world.grant(["apps:read", "keys:create"])) as api:
            assert [api.post(keys, json=body).status_code for _ in range(3)] == [201] * 3
            assert_limited(api.post(keys, json=body), limit, 60)
        with transaction(world.sessions) as session:
            other = session.scalars(select(App).where(App.slug == "other")).one()
            started = grants.start_request(session, app_slug="other",
                                           scopes=["apps:read", "keys:create"],
                                           ttl_seconds=None, now=utcnow())
            grants.approve(started.record, developer_id=other_developer, app=other)
            token = grants.redeem(session, started.device_code, utcnow()).token
        with world.api(token) as api:
            made = api.post("/api/developer/apps/other/keys", json=body)
            assert made.status_code == 201, made.text
    assert _key_count(world.sessions, revoked=False) == 4


def test_key_management_limit_on_console_forms(start_world: WorldFactory) -> None:
    """The console's key forms answer 429 on the app page, sharing the JSON API's budget."""
    limit = KEYS.key_management
    fields = {"label": "backend", "scope": ["orders:read"], "environment": "test"}

    def form() -> dict[str, object]:
        # A form shown anew each time: its own one-time token (one key per form).
        return {"formToken": secrets.token_urlsafe(32), **fields}
    with start_world(KEYS) as world:
        console, csrf = world.console()
        with console:
            made = console.post("/apps/game/keys", data={"csrf": csrf, **form()})
            assert made.status_code == 200 and "zpk_test_" in made.text
            with world.sessions() as session:
                first_id = session.scalars(select(ApiKey.id)).one()
            by_json = console.post("/api/developer/apps/game/keys",
                                   json={"scopes": ["orders:read"]})
            assert by_json.status_code == 201
            second_id = by_json.json()["key"]["id"]
            revoke = f"/apps/game/keys/{second_id}/revoke"
            assert console.post(revoke, data={"csrf": csrf}).status_code == 303

            assert_limited_page(console.post("/apps/game/keys", data={"csrf": csrf, **form()}),
                                limit, 60)
            refused = console.post(f"/apps/game/keys/{first_id}/revoke", data={"csrf": csrf})
            assert_limited_page(refused, limit, 60)
            assert_limited(console.post("/api/developer/apps/game/keys",
                                        json={"scopes": ["orders:read"]}), limit, 60)
            assert _key_count(world.sessions, revoked=False) == 1  # first, still live

            world.clock.advance(59)
            assert_limited_page(console.post(f"/apps/game/keys/{first_id}/revoke",
                                             data={"csrf": csrf}), limit, 1)
            world.clock.advance(1)
            lifted = console.post(f"/apps/game/keys/{first_id}/revoke", data={"csrf": csrf})
            assert lifted.status_code == 303
            assert lifted.headers["location"] == "/apps/game?done=key-revoked#keys"
            made = console.post("/apps/game/keys", data={"csrf": csrf, **form()})
            assert made.status_code == 200 and "zpk_test_" in made.text
    assert _key_count(world.sessions, revoked=True) == 2
    assert _key_count(world.sessions, revoked=False) == 1


def test_grant_approval_limit(start_world: WorldFactory) -> None:
    """Approving or denying CLI sign-ins, by JSON or by the console page, share one budget;
    a refused approval leaves the request pending, and it can be approved once lifted."""
    limit = APPROVALS.grant_approval
    approve = "/api/developer/cli/approve"
    with start_world(APPROVALS) as world, world.api() as api:
        started = [api.post("/api/developer/cli/auth-requests", json={"app": "game"}).json()
                   for _ in range(3)]
        first, second, third = (s["userCode"] for s in started)
        console, csrf = world.console()
        with console:
            answered = console.post(approve, json={"userCode": first, "decision": "approve"})
            assert answered.status_code == 200 and answered.json()["status"] == "approved"
            denied = console.post("/cli/approve", data={"csrf": csrf, "code": second,
                                                        "decision": "deny"})
            assert denied.status_code == 200 and "CLI sign-in denied" in denied.text

            assert_limited(console.post(approve, json={"userCode": third,
                                                       "decision": "approve"}), limit, 300)
            page = console.post("/cli/approve", data={"csrf": csrf, "code": third,
                                                      "decision": "approve", "app": "game"})
            assert_limited_page(page, limit, 300)
            assert f'name="code" value="{third}"' in page.text  # the form stays to retry
            pending = api.post("/api/developer/cli/token",
                               json={"deviceCode": started[2]["deviceCode"]})
            assert pending.json()["code"] == "authorization_pending"

            world.clock.advance(299)
            assert_limited(console.post(approve, json={"userCode": third,
                                                       "decision": "approve"}), limit, 1)
            world.clock.advance(1)
            page = console.post("/cli/approve", data={"csrf": csrf, "code": third,
                                                      "decision": "approve", "app": "game"})
            assert page.status_code == 200 and "CLI sign-in approved" in page.text
        issued = api.post("/api/developer/cli/token", json={"deviceCode": started[2]["deviceCode"]})
        assert issued.status_code == 200 and issued.json()["token"].startswith("zcli_")


def test_grant_lookup_limit_on_the_approve_page(start_world: WorldFactory) -> None:
    """Opening /cli/approve?code= looks the user code up: limited per developer like
    approving, so a signed-in script cannot walk the codes; a right code is refused too
    while the limit holds, and approving is a budget of its own."""
    limit = LOOKUPS.grant_lookup
    with start_world(LOOKUPS) as world, world.api() as api:
        code = api.post("/api/developer/cli/auth-requests", json={"app": "game"}
                        ).json()["userCode"]
        console, csrf = world.console()
        with console:
            assert console.get("/cli/approve", params={"code": "WRONG-CODE"}
                               ).status_code == 404
            shown = console.get("/cli/approve", params={"code": code})
            assert shown.status_code == 200 and "Approve" in shown.text
            assert_limited_page(console.get("/cli/approve", params={"code": code}), limit, 300)
            approved = console.post("/cli/approve", data={"csrf": csrf, "code": code,
                                                          "decision": "approve", "app": "game"})
            assert approved.status_code == 200 and "CLI sign-in approved" in approved.text
            world.clock.advance(300)
            # Lifted: the lookup runs again and finds the request answered.
            assert console.get("/cli/approve", params={"code": code}).status_code == 409


def test_cli_sign_in_request_limit(start_world: WorldFactory) -> None:
    """Starting a CLI sign-in (device or browser flow) is limited per address; polling for
    the token is not a new request and goes on while the limit holds."""
    limit = SIGN_INS.cli_request
    requests = "/api/developer/cli/auth-requests"
    with start_world(SIGN_INS) as world, world.api() as api:
        first = api.post(requests, json={"app": "game", "scopes": ["apps:read"]})
        assert first.status_code == 201
        assert api.post(requests, json={}).status_code == 201
        assert_limited(api.post(requests, json={"app": "game"}), limit, 600)
        for _ in range(3):
            polled = api.post("/api/developer/cli/token",
                              json={"deviceCode": first.json()["deviceCode"]})
            assert polled.json()["code"] == "authorization_pending"

        world.clock.advance(300)
        assert_limited(api.post(requests, json={"app": "game"}), limit, 300)
        world.clock.advance(300)
        assert api.post(requests, json={"app": "game"}).status_code == 201
    with world.sessions() as session:
        assert session.scalar(select(func.count()).select_from(CliAuthRequest)) == 3


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_cli_sign_in_request_limit_on_redis(start_router: RouterFactory, redis_url: str) -> None:
    """With ``redis_url`` the limiter is Redis, on the server's clock: the same envelope, the
    hits stored in Redis, lifted after a (one-second) window of real time."""
    limit = Limit("cli-request", 2, 1)
    overrides = {"limits": Limits(cli_request=limit)}
    requests = "/api/developer/cli/auth-requests"
    with redis.Redis.from_url(redis_url) as store, \
            start_router(redis_url=redis_url,
                         app_options={"developer_overrides": overrides}) as router, \
            httpx.Client(base_url=router.url, timeout=10,
                         headers={"host": f"api.localhost:{router.port}"}) as api:
        stored = f"svc:rl:{limit.name}:127.0.0.1"
        store.delete(stored)  # another test's sign-ins on the shared server
        assert [api.post(requests, json={}).status_code for _ in range(2)] == [201, 201]
        assert_limited(api.post(requests, json={}), limit, 1, says="Too many cli-request "
                       "requests: at most 2 requests per 1 second.")
        assert store.zcard(stored) == 2  # the allowed hits, and only those
        time.sleep(1)
        assert api.post(requests, json={}).status_code == 201
