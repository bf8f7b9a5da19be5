"""Runtime verification: the origin rules, the manifest of spec 2.8, and endpoint probes.

The report lists every check in order, passed or failed, with what was seen, what was
expected and how to fix it. The runtime may become ``active`` only when all of them pass.

Probes show that the webhook and payment-submitted routes are real: an unsigned, empty
POST must be refused the way a real receiver refuses it (spec 6 rule 1: 401), not answered
404 by a static host or accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import ip_address

from manifest.addresses import is_public_address
from manifest.fetch import Answer, FetchFailed, OriginClient
from manifest.rules import (
    MANIFEST_PATH,
    PAYMENT_SUBMITTED_PATH,
    WEBHOOK_PATH,
    Check,
    Expected,
    check_document,
)
from manifest.url_policy import CheckedUrl, UrlRefused, check_runtime_origin, is_local_target

PUBLIC_ORIGIN_RULE = "the origin is a developer-owned public HTTPS origin"
PROBE_BODY = b"{}"
PROBE_HEADERS = (("Content-Type", "application/json"),)


@dataclass(frozen=True, slots=True)
class Report:
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)


def verify_runtime(origin: str, expected: Expected, client: OriginClient) -> Report:
    """Check ``origin`` against ``expected``; network failures become failed checks."""
    try:
        checked = check_runtime_origin(origin, client.policy)
    except UrlRefused as exc:
        return Report((Check("origin", PUBLIC_ORIGIN_RULE, False, seen=exc.message,
                             expected="https://<your domain>",
                             fix="Save your own deployed HTTPS origin with `svc runtime "
                                 "configure --origin`."),))
    try:
        answer = client.request(checked, "GET", MANIFEST_PATH, follow_redirects=True)
    except FetchFailed as exc:
        return Report((_origin_admitted(checked, None), _fetch_failed(exc)))
    checks = [_origin_admitted(checked, answer.address), *_manifest_checks(answer, expected)]
    checks.append(_probe(client, checked, WEBHOOK_PATH, "webhook_probe",
                         "an unsigned POST to the webhook path is refused with 401",
                         lambda status: status == 401))
    checks.append(_probe(client, checked, PAYMENT_SUBMITTED_PATH, "payment_submitted_probe",
                         "an unauthenticated POST to the payment-submitted path is refused "
                         "by a real route (4xx, not 404)",
                         lambda status: 400 <= status < 500 and status not in (404, 405, 410)))
    return Report(tuple(checks))


def _origin_admitted(checked: CheckedUrl, address: str | None) -> Check:
    """The origin passed the rules; says which ones, so that a dev run on loopback is not
    told its origin is public HTTPS. ``address``: where the manifest came from, if it did (a
    public-looking name may resolve to a private address, which only the dev switch admits)."""
    local = is_local_target(checked) or (
        address is not None and not is_public_address(ip_address(address)))
    if not local:
        return Check("origin", PUBLIC_ORIGIN_RULE, True, seen=checked.url)
    return Check("origin", "the origin is on a loopback or private address, admitted only in "
                 "dev (SVCSRV_ALLOW_PRIVATE_ORIGINS); production needs a developer-owned "
                 "public HTTPS origin", True, seen=checked.url)


def _fetch_failed(exc: FetchFailed) -> Check:
    fixes = {
        "dns": "Make the origin's name resolve (A or AAAA record) and try again.",
        "refused": "The origin must resolve only to public addresses; deploy it on a "
                   "public server.",
        "connect": "Deploy the runtime and make sure it accepts HTTPS connections.",
        "tls": "Serve a valid certificate for the origin's name (from a public CA).",
        "timeout": "Serve the manifest faster; verification waits only a few seconds.",
        "too_large": "Serve a small manifest: only the fields of the runtime manifest schema.",
        "redirect": f"Serve {MANIFEST_PATH} at the origin itself; redirects are followed "
                    "only within the origin.",
        "protocol": "Answer with a valid HTTP/1.1 response.",
    }
    return Check("manifest_fetch", f"GET {MANIFEST_PATH} answers 200", False, seen=exc.message,
                 expected="HTTP 200", fix=fixes.get(exc.kind, "Check the deployment."))


def _manifest_checks(answer: Answer, expected: Expected) -> list[Check]:
    rule = f"GET {MANIFEST_PATH} answers 200"
    if answer.status != 200:
        return [Check("manifest_fetch", rule, False, seen=f"HTTP {answer.status}",
                      expected="HTTP 200",
                      fix=f"Serve the runtime manifest at {MANIFEST_PATH} with status 200.")]
    fetched = Check("manifest_fetch", rule, True, seen="HTTP 200", expected="HTTP 200")
    try:
        document = json.loads(answer.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        start = answer.body[:60].decode("utf-8", "replace")
        return [fetched, Check("manifest_json", "the manifest is JSON", False,
                               seen=f"{answer.header('content-type') or 'no content-type'}: "
                                    f"{start!r}",
                               expected="a JSON object (application/json)",
                               fix="Serve the manifest as JSON (UTF-8).")]
    return [fetched, Check("manifest_json", "the manifest is JSON", True,
                           seen=answer.header("content-type"), expected="JSON"),
            *check_document(document, expected)]


def _probe(client: OriginClient, origin: CheckedUrl, path: str, check_id: str, rule: str,
           accepts: Callable[[int], bool]) -> Check:
    try:
        answer = client.request(origin, "POST", path, body=PROBE_BODY, headers=PROBE_HEADERS)
    except FetchFailed as exc:
        return Check(check_id, rule, False, seen=exc.message, expected="HTTP 401",
                     fix=f"Deploy POST {path} on the runtime origin.")
    status = answer.status
    if accepts(status):
        return Check(check_id, rule, True, seen=f"HTTP {status}", expected="HTTP 401")
    if status in (404, 405, 410):
        fix = (f"No POST route answers {path}: deploy it (a static host answers 404/405 for "
               "every path).")
    elif 200 <= status < 300:
        fix = (f"POST {path} accepted an unsigned, empty request: verify x-svc-signature over "
               "the raw body and answer 401 when it fails."
               if path == WEBHOOK_PATH else
               f"POST {path} accepted an empty request: require a delivery id or a verified "
               "paymentProof and refuse otherwise.")
    elif 300 <= status < 400:
        fix = f"POST {path} redirects; serve the route itself (redirects are not followed)."
    elif status == 403 and path == WEBHOOK_PATH:
        # Spec 6: a receiver answers 401 to a bad signature. A 403 here is most often a CSRF
        # guard or a firewall answering before the route, and it would refuse our signed
        # deliveries just the same.
        fix = (f"POST {path} answered 403, which is usually CSRF protection or an access rule "
               "in front of the route, and would refuse signed deliveries too: exempt the "
               "route from it, verify x-svc-signature and answer 401 when it fails.")
    elif status >= 500:
        fix = f"POST {path} failed with a server error; it must refuse the request with 401."
    else:
        fix = f"POST {path} must refuse a request without a valid signature with 401."
    return Check(check_id, rule, False, seen=f"HTTP {status}", expected="HTTP 401", fix=fix)

