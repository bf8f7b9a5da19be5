"""``--verbose`` (spec 4.10): each HTTP request on stderr, before or after the command, and
never a secret: the real ``svc`` executable against a real router, as test_cli_groups does.
"""

from __future__ import annotations

import re

import httpx

from svc.grant_store import GrantStore
from svc.trace import shown_url
from tests.svc.test_cli_end_to_end import World
from tests.svc.test_cli_groups import ok, run, signed_in

TRACE = re.compile(r"^svc: (GET|POST|PATCH|PUT|DELETE) (\S+) -> (\d{3}) in \d+ ms$")


def traced(stderr: str) -> list[tuple[str, str, int]]:
    found = [TRACE.match(line) for line in stderr.splitlines()]
    return [(m[1], m[2], int(m[3])) for m in found if m]


def grant_token(world: World) -> str:
    stored = GrantStore(world.config).load()
    assert stored is not None and stored.token.startswith("zcli_")
    return stored.token


def test_verbose_before_or_after_the_command_traces_each_request(world: World) -> None:
    signed_in(world, "apps:read,products:write")
    products = f"{world.url}/api/developer/apps/game/products"
    for args in (("--verbose", "product", "list"), ("product", "list", "--verbose"),
                 ("--verbose", "product", "list", "--json")):
        done = run(world, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert traced(done.stderr) == [("GET", products, 200)], (args, done.stderr)
    created = run(world, "product", "create", "--product", "retry", "--name", "Retry",
                  "--price", "0.01", "--verbose")
    assert ("POST", products, 201) in traced(created.stderr), created.stderr
    # refusals are traced with their status too
    other = run(world, "product", "list", "--app", "other", "--verbose")
    assert other.returncode != 0
    [(method, url, status)] = traced(other.stderr)
    assert (method, url) == ("GET", f"{world.url}/api/developer/apps/other/products")
    assert 400 <= status < 500
    quiet = run(world, "product", "list")
    assert quiet.returncode == 0 and traced(quiet.stderr) == [] and "svc: GET" not in (
        quiet.stderr)


def test_verbose_output_never_holds_a_token_key_or_secret(world: World) -> None:
    signed_in(world, "apps:read,products:write,keys:create")
    token = grant_token(world)
    ok(world, "product", "create", "--product", "retry", "--name", "Retry", "--price", "0.01")
    made = run(world, "--verbose", "keys", "create", "--scopes", "orders:create", "--json")
    assert made.returncode == 0, made.stderr
    secret = ok(world, "keys", "create", "--scopes", "orders:create")["secret"]
    assert secret.startswith("zpk_")
    ordered = run(world, "--verbose", "order", "create", "--product", "retry",
                  "--developer-user", "user-1", env={"SVC_API_KEY": secret})
    assert ordered.returncode == 0, ordered.stderr
    assert ("POST", f"{world.url}/api/orders", 201) in traced(ordered.stderr)
    shown = made.stderr + ordered.stderr
    assert traced(made.stderr) and traced(ordered.stderr)
    # The grant's zcli_ token and the zpk_ key are sent in headers on every request above,
    # and keys create gets a zpk_ secret back in its body: none of them reaches stderr.
    created_secret = made.stdout.split('"secret": "', 1)[1].split('"', 1)[0]
    for value in (token, secret, created_secret, "Bearer", "authorization", "zpk_", "zcli_"):
        assert value not in shown, value


def test_urls_are_shown_without_secrets() -> None:
    url = httpx.URL("http://user:pw@api.localhost:8000/api/receipts/zpk_abc123"
                    "?code=sum_x1&limit=5&apiKey=k&token=t&status=failed")
    text = shown_url(url)
    assert text == ("http://api.localhost:8000/api/receipts/zpk_[redacted]?code=[redacted]"
                    "&limit=5&apiKey=[redacted]&token=[redacted]&status=failed")
    for secret in ("user", "pw", "abc123", "sum_x1", "=k&", "=t&"):
        assert secret not in text


def test_json_before_or_after_the_command_prints_the_same(world: World) -> None:
    """Like --verbose, --json is read on either side of the command (spec 4.10's flags)."""
    import json
    signed_in(world, "apps:read,products:write")
    ok(world, "product", "create", "--product", "retry", "--name", "Retry", "--price", "0.01")
    before, after = run(world, "--json", "product", "list"), run(world, "product", "list",
                                                                   "--json")
    assert before.returncode == after.returncode == 0, (before.stderr, after.stderr)
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert "retry" in before.stdout
    plain = run(world, "product", "list")
    assert plain.returncode == 0
    try:
        json.loads(plain.stdout)
    except ValueError:
        pass  # a table for people, as without the flag
    else:
        raise AssertionError(f"plain output parsed as JSON: {plain.stdout!r}")
