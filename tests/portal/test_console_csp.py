"""Every console page sends one strict Content-Security-Policy that still lets it render.

The expected hashes are computed from the HTML actually served (its ``<style>`` block and
inline ``<script>``), so the policy is checked against the page, not against the constants
that produced it.
"""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import add_owned_app
from tests.portal.conftest import Console, key_form_of, log_in

STYLE_RE = re.compile(r"<style>(.*?)</style>", re.S)
SCRIPT_RE = re.compile(r"<script([^>]*)>(.*?)</script>", re.S)


def sha256_source(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def directives(response: httpx.Response) -> dict[str, list[str]]:
    policies = response.headers.get_list("content-security-policy")
    assert len(policies) == 1, policies
    parsed: dict[str, list[str]] = {}
    for part in policies[0].split(";"):
        name, *values = part.split()
        assert name not in parsed, f"{name} given twice"
        parsed[name] = values
    return parsed


def assert_strict_page(response: httpx.Response, *, scripted: bool = False) -> None:
    """The exact policy of ``portal.console.layout.csp``, derived from the served page."""
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    for loose in ("unsafe-inline", "unsafe-eval", "unsafe-hashes", "strict-dynamic", "*",
                  "http:", "https:", "data:", "blob:", "nonce-"):
        assert loose not in policy, (loose, policy)
    styles = STYLE_RE.findall(response.text)
    assert len(styles) == 1, "one hashed style block"
    assert " style=" not in response.text  # attributes would need 'unsafe-inline'
    scripts = SCRIPT_RE.findall(response.text)
    assert all(attrs == "" for attrs, _ in scripts), "no external or typed scripts"
    assert bool(scripts) is scripted
    script_src = [sha256_source(body) for _, body in scripts] or ["'none'"]
    assert directives(response) == {
        "default-src": ["'none'"],
        "script-src": script_src,
        "style-src": [sha256_source(styles[0])],
        "img-src": ["'self'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["cross-origin-opener-policy"] == "same-origin"


def test_signed_out_pages_send_the_strict_policy(console: Console) -> None:
    with console.client() as client:
        for path in ("/login", "/login?next=/apps&signed_out=1", "/signup",
                     "/verify?email=a%40example.com&sent=1"):
            response = client.get(path)
            assert response.status_code == 200, path
            assert_strict_page(response)
        # A form answered with an error is a page too (here: the CSRF refusal).
        refused = client.post("/login", data={"login": "x", "password": "y"})
        assert refused.status_code == 403
        assert_strict_page(refused)


def test_signed_in_pages_send_the_strict_policy(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    add_owned_app(sessions, developer[1], "game")
    with console.client() as client:
        log_in(client)
        for path in ("/apps", "/apps/new", "/apps/game", "/apps/game/webhooks",
                     "/apps/game/runtime", "/device", "/keys"):
            response = client.get(path)
            assert response.status_code == 200, path
            # the new-app form previews the slug made from the name as it is typed
            assert_strict_page(response, scripted=path == "/apps/new")
        missing = client.get("/apps/nope")
        assert missing.status_code == 404
        assert_strict_page(missing)

        # A page with a script (copying the new key) allows exactly that script.
        created = client.post("/apps/game/keys", data={
            **key_form_of(client.get("/apps/game")), "label": "ci", "environment": "test",
            "scope": ["orders:read"]})
        assert created.status_code == 200 and "zpk_test_" in created.text
        assert_strict_page(created, scripted=True)
        org_key = client.post("/keys/new", data={**key_form_of(client.get("/keys")),
                                             "environment": "test", "scope": ["orders:read"]})
        assert org_key.status_code == 200 and "zpk_test_" in org_key.text
        assert_strict_page(org_key, scripted=True)
