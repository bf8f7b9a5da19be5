"""The rules of a runtime manifest (spec 2.8), as plain functions over plain data.

Each rule yields one :class:`Check`: passed or failed, the value seen, the value expected
and, when it failed, how to fix it. A manifest may spell a field in any accepted way
(``appId`` or ``app_id``); two spellings with different values are refused rather than
guessed between.

``fix`` sentences never name the runtime origin: the setup page, which anyone can open,
shows them. ``seen`` and ``expected`` carry values for the developer (API and CLI).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MANIFEST_PATH = "/.well-known/svc.json"
WEBHOOK_PATH = "/api/svc/webhook"
PAYMENT_SUBMITTED_PATH = "/api/svc/payment-submitted"
MAX_PATH_LENGTH = 512
MAX_SHOWN = 200  # characters of a seen value kept in a report

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
# A concrete path: starts with one "/", no query, fragment, backslash, whitespace or
# control character, no dot segments. "//host" would be a protocol-relative URL: an open
# redirect for a full-page authorization return.
_PATH = re.compile(r"^/(?!/)[^?#\\\s\x00-\x1f\x7f]*\Z")


@dataclass(frozen=True, slots=True)
class Check:
    id: str  # stable: "appId", "manifest_fetch", "webhook_probe", ...
    rule: str  # what was checked, for people
    passed: bool
    seen: str | None = None
    expected: str | None = None
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "rule": self.rule, "passed": self.passed, "seen": self.seen,
                "expected": self.expected, "fix": self.fix}


@dataclass(frozen=True, slots=True)
class Expected:
    """What the manifest must say, from the app's saved state."""

    app_id: str
    slug: str
    pay_to: str | None
    app_path: str
    entry_path: str
    runtime_origin: str


# (canonical name, accepted spellings, the rule in words)
FIELDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("appId", ("appId", "app_id"), "appId equals the app id"),
    ("slug", ("slug", "appSlug", "app_slug"), "slug equals the app slug"),
    ("payTo", ("payTo", "pay_to"), "payTo equals the app's pay_to"),
    ("webhookPath", ("webhookPath", "webhook_path"), f"webhookPath is {WEBHOOK_PATH}"),
    ("paymentSubmittedPath", ("paymentSubmittedPath", "payment_submitted_path"),
     f"paymentSubmittedPath is {PAYMENT_SUBMITTED_PATH}"),
    ("appPath", ("appPath", "app_path"), "appPath is the saved app path (concrete, never "
                                         "null; / when missing)"),
    ("entryPath", ("entryPath", "entry_path"), "entryPath is the saved entry path (concrete, "
                                               "never null; / when missing)"),
)
# Spec 2.8 gives these paths a default: a manifest without one says "/". Null is refused.
DEFAULT_PATH = "/"
_DEFAULTED = frozenset({"appPath", "entryPath"})
RUNTIME_ORIGIN_RULE = "runtimeOrigin, when present, equals the saved origin"


def is_concrete_path(value: object) -> bool:
    """``/`` or ``/play``: what appPath and entryPath must be (spec 2.8)."""
    if not isinstance(value, str) or len(value) > MAX_PATH_LENGTH or not _PATH.match(value):
        return False
    return not any(segment in (".", "..") for segment in value.split("/"))


def same_origin(a: str, b: str) -> bool:
    """Scheme, host and port equal; case and a default port or trailing slash aside."""
    return _origin_key(a) == _origin_key(b) and _origin_key(a) is not None


def check_document(document: object, expected: Expected) -> list[Check]:
    """Every field rule of spec 2.8 against a parsed manifest."""
    if not isinstance(document, dict):
        return [Check("manifest_object", "the manifest is a JSON object", False,
                      seen=_shown(document), expected="a JSON object",
                      fix="Serve a JSON object ({...}) with the fields of the runtime "
                          "manifest schema.")]
    checks = [_field_check(document, name, spellings, rule, expected)
              for name, spellings, rule in FIELDS]
    checks.append(_runtime_origin_check(document, expected))
    return checks


def _field_check(document: Mapping[str, Any], name: str, spellings: tuple[str, ...], rule: str,
                 expected: Expected) -> Check:
    want = _wanted(name, expected)
    present = [(s, document[s]) for s in spellings if s in document]
    if not present:
        if want is None:  # payTo of an app without an address
            return _pay_to_check(rule, name, "", expected)
        if name in _DEFAULTED and want == DEFAULT_PATH:
            return Check(name, rule, True, seen=None, expected=want)
        others = f" (also accepted: {', '.join(spellings[1:])})" if len(spellings) > 1 else ""
        return Check(name, rule, False, seen=None, expected=want,
                     fix=f"Add \"{name}\": {json.dumps(want)} to the manifest{others}.")
    values = {json.dumps(v, sort_keys=True) for _, v in present}
    if len(values) > 1:
        both = ", ".join(f"{s}={_shown(v)}" for s, v in present)
        return Check(name, rule, False, seen=_cut(both), expected=want,
                     fix=f"The manifest spells {name} more than once with different values; "
                         f"keep one spelling.")
    spelling, value = present[0]
    return _value_check(name, rule, spelling, value, want, expected)


def _wanted(name: str, expected: Expected) -> str | None:
    return {
        "appId": expected.app_id, "slug": expected.slug, "payTo": expected.pay_to,
        "webhookPath": WEBHOOK_PATH, "paymentSubmittedPath": PAYMENT_SUBMITTED_PATH,
        "appPath": expected.app_path, "entryPath": expected.entry_path,
    }[name]


def _value_check(name: str, rule: str, spelling: str, value: object, want: str | None,
                 expected: Expected) -> Check:
    seen = _shown(value)
    if name in ("appPath", "entryPath"):
        if value is None:
            return Check(name, rule, False, seen="null", expected=want,
                         fix=f"{spelling} is null: a full-page authorization return would land "
                             f"on the runtime root. Set it to a concrete path such as "
                             f"{json.dumps(want)}.")
        if not is_concrete_path(value):
            return Check(name, rule, False, seen=seen, expected=want,
                         fix=f"{spelling} must be a concrete path starting with one '/' "
                             "(such as \"/\" or \"/play\"), without query or fragment.")
    if not isinstance(value, str):
        return Check(name, rule, False, seen=seen, expected=want,
                     fix=f"{spelling} must be a string: {json.dumps(want)}.")
    if name == "payTo":
        return _pay_to_check(rule, spelling, value, expected)
    if value != want:
        where = {"appPath": " or save the path you serve with `svc runtime configure "
                            "--app-path`",
                 "entryPath": " or save the path you serve with `svc runtime configure "
                              "--entry-path`"}.get(name, "")
        return Check(name, rule, False, seen=seen, expected=want,
                     fix=f"Set {spelling} to {json.dumps(want)}{where}.")
    return Check(name, rule, True, seen=seen, expected=want)


def _pay_to_check(rule: str, spelling: str, value: str, expected: Expected) -> Check:
    want = expected.pay_to
    if want is None:
        return Check("payTo", rule, False, seen=_shown(value) if value else None, expected=None,
                     fix="The app has no pay_to address yet: set one in the console first, "
                         "then put the same address in the manifest.")
    if not _ADDRESS.match(value):
        return Check("payTo", rule, False, seen=_shown(value), expected=want,
                     fix=f"{spelling} must be a Base USDC address (0x and 40 hex digits): "
                         f"{want}.")
    # Addresses compare without their EIP-55 letter case.
    if value.lower() != want.lower():
        return Check("payTo", rule, False, seen=value, expected=want,
                     fix=f"Set {spelling} to the app's pay_to {want} (or change the app's "
                         "pay_to in the console).")
    return Check("payTo", rule, True, seen=value, expected=want)


def _runtime_origin_check(document: Mapping[str, Any], expected: Expected) -> Check:
    if "runtimeOrigin" not in document:
        return Check("runtimeOrigin", RUNTIME_ORIGIN_RULE, True, seen=None,
                     expected=expected.runtime_origin)
    value = document["runtimeOrigin"]
    if isinstance(value, str) and same_origin(value, expected.runtime_origin):
        return Check("runtimeOrigin", RUNTIME_ORIGIN_RULE, True, seen=_shown(value),
                     expected=expected.runtime_origin)
    return Check("runtimeOrigin", RUNTIME_ORIGIN_RULE, False, seen=_shown(value),
                 expected=expected.runtime_origin,
                 fix="Set runtimeOrigin to the origin saved with `svc runtime configure` "
                     "(or remove the field), or save the origin you deploy to.")


def _origin_key(origin: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return None
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname.lower().rstrip("."), port or default


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return _cut(text)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"
