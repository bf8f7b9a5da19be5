"""``svc doctor``'s rules: what is wrong with a project's ``svc.toml`` and env file.

Pure functions over plain data (the command reads the files). A production-like
environment (anything but local development) must not point at loopback, private or
internal addresses, and its runtime origin must be the developer's own host, never the
service's proxy host ``<slug>.{apps_domain}`` (spec 4.10, 4.11, 5.5, 8 item 8). Findings
name the key, never its value when the key holds a secret.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

LOCAL_ENVIRONMENTS = frozenset({"local", "dev", "development"})
DEFAULT_ENVIRONMENT = "production"  # unnamed means deployed: the safe assumption
ENV_NAME_KEY = "SVC_ENV"
RETURN_PATH = "/svc-auth-return"
REQUIRED_ENV = ("SVC_APP_ID", "SVC_APP_SLUG", "SVC_PAY_TO", "SVC_RUNTIME_ORIGIN",
                "SVC_RUNTIME_APP_PATH", "SVC_RETURN_URL", "SVC_WEBHOOK_SECRET",
                "SVC_WEBHOOK_URL")
# URLs a browser or the service itself uses; each must be public in production.
PUBLIC_URL_KEYS = ("SVC_RUNTIME_ORIGIN", "SVC_RETURN_URL", "SVC_WEBHOOK_URL")
SECRET_PREFIXES = {"SVC_API_KEY": "zpk_", "SVC_WEBHOOK_SECRET": "zwhsec_"}
_INTERNAL_SUFFIXES = (".local", ".internal", ".localdomain", ".lan", ".home.arpa")
_PAY_TO = re.compile(r"0x[0-9a-fA-F]{40}")
_PLACEHOLDER = re.compile(r"[<>…]|\.\.\.|REPLACE|CHANGE_?ME|xxxx", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    code: str
    key: str  # e.g. SVC_RUNTIME_ORIGIN or svc.toml:[runtime].origin
    message: str
    fix: str
    level: str = "error"  # or "warning", which does not fail the check

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Inputs:
    environment: str
    env: dict[str, str]  # the env file, empty without one
    toml: dict[str, str | None]  # svc.toml keys as spelled there, e.g. "[runtime].origin"
    apps_domain: str | None = None


def production_like(environment: str) -> bool:
    return environment.strip().lower() not in LOCAL_ENVIRONMENTS


def examine(inputs: Inputs) -> list[Finding]:
    findings = list(_env_findings(inputs))
    findings += _toml_findings(inputs)
    return findings


def apps_domain_of(env: dict[str, str]) -> str | None:
    """``apps.example`` from ``SVC_RETURN_URL=https://<slug>.apps.example/...``."""
    slug, host = env.get("SVC_APP_SLUG"), urlsplit(env.get("SVC_RETURN_URL", "")).hostname
    if slug and host and host.startswith(f"{slug}."):
        return host[len(slug) + 1:]
    return None


def _env_findings(inputs: Inputs) -> Iterator[Finding]:
    env, strict = inputs.env, production_like(inputs.environment)
    if not env:
        return
    for key in REQUIRED_ENV:
        if not env.get(key):
            state = "is empty" if key in env else "is not set"
            yield Finding("missing_variable", key, f"{key} {state}.", _missing_fix(key))
    for key in PUBLIC_URL_KEYS:
        if env.get(key):
            yield from _url_findings(key, env[key], strict, https=strict)
    if env.get("SVC_RUNTIME_ORIGIN"):
        yield from _origin_findings("SVC_RUNTIME_ORIGIN", env["SVC_RUNTIME_ORIGIN"],
                                    inputs.apps_domain)
    if env.get("DATABASE_URL"):
        yield from _database_findings(env["DATABASE_URL"], strict)
    if env.get("SVC_PAY_TO"):
        yield from _pay_to_findings("SVC_PAY_TO", env["SVC_PAY_TO"])
    path = env.get("SVC_RUNTIME_APP_PATH")
    if path is not None and not path.startswith("/"):
        yield Finding("runtime_app_path_invalid", "SVC_RUNTIME_APP_PATH",
                      "The runtime app path must be a concrete path starting with '/'.",
                      "Set SVC_RUNTIME_APP_PATH=/ (the default) or your app's path.")
    if strict and env.get("SVC_RETURN_URL") and env.get("SVC_APP_SLUG"):
        yield from _return_url_findings(env["SVC_RETURN_URL"], env["SVC_APP_SLUG"],
                                        inputs.apps_domain)
    for key, prefix in SECRET_PREFIXES.items():
        if env.get(key):
            yield from _secret_findings(key, env[key], prefix, strict)


# An export writes these empty (a secret is never exported; an origin not declared yet has
# no value), so "run the export" would send the developer round in a circle.
_WEBHOOK_SIGNING_COMMANDS = ("`svc config apply` or `svc webhook upsert` (or `svc webhook "
                          "rotate`)")
_MISSING_FIXES = {
    "SVC_WEBHOOK_SECRET": "Paste the zwhsec_ signing secret that " + _WEBHOOK_SIGNING_COMMANDS
                          + " showed once; an export never writes a secret.",
    "SVC_RUNTIME_ORIGIN": "Declare your runtime's origin (svc.config.json `runtime.origin`, "
                          "then `svc config apply`; or `svc runtime configure --origin URL`), "
                          "then `svc export --format dotenv --output .env` writes it.",
}


def _missing_fix(key: str) -> str:
    return _MISSING_FIXES.get(key, f"Set {key}; `svc export --format dotenv` writes "
                                   "every variable.")


def _toml_findings(inputs: Inputs) -> Iterator[Finding]:
    strict = production_like(inputs.environment)
    for name in ("api_url", "entry_url", "webhook_url", "[runtime].origin"):
        value = inputs.toml.get(name)
        if value:
            https = strict and name != "api_url"  # the API's own scheme is the service's call
            yield from _url_findings(f"svc.toml:{name}", value, strict, https=https)
    origin = inputs.toml.get("[runtime].origin")
    if origin:
        yield from _origin_findings("svc.toml:[runtime].origin", origin, inputs.apps_domain)
    if inputs.toml.get("pay_to"):
        yield from _pay_to_findings("svc.toml:pay_to", inputs.toml["pay_to"] or "")
    slug, env_slug = inputs.toml.get("app_slug"), inputs.env.get("SVC_APP_SLUG")
    if slug and env_slug and slug != env_slug:
        yield Finding("app_slug_mismatch", "SVC_APP_SLUG", f"The env file is for app "
                      f"'{env_slug}' but svc.toml names '{slug}'.",
                      "Use the env file exported for this app (`svc export --format dotenv`).")


def _url_findings(key: str, url: str, strict: bool, *, https: bool) -> Iterator[Finding]:
    parts = urlsplit(url.strip())
    try:
        host = parts.hostname
    except ValueError:
        host = None
    if parts.scheme not in ("http", "https") or not host:
        yield Finding("url_invalid", key, f"{key} is not an http(s) URL: {url!r}.",
                      f"Set {key} to a full URL such as https://game.example.com.")
        return
    where = _private_kind(host)
    if strict and where is not None:
        yield Finding(f"url_{where}", key, f"{key} points at a {where.replace('_', ' ')} "
                      f"address ({host}) in a production-like environment.",
                      f"Use your public HTTPS host in {key}; loopback and private addresses "
                      "only work on your machine (or pass --env local when checking local "
                      "development).")
    elif https and parts.scheme != "https":
        yield Finding("url_not_https", key, f"{key} is not HTTPS ({url}).",
                      f"Serve it over HTTPS and set {key} to the https:// URL.")


def _private_kind(host: str) -> str | None:
    """``loopback``, ``private_ip`` or ``internal_host``; ``None`` for a public name."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback"
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return "internal_host" if name.endswith(_INTERNAL_SUFFIXES) or "." not in name \
            else None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback or address.is_unspecified:
        return "loopback"
    if address.is_private or address.is_link_local or address.is_reserved or \
            address in ipaddress.ip_network("100.64.0.0/10"):
        return "private_ip"
    return None


def _origin_findings(key: str, origin: str, apps_domain: str | None) -> Iterator[Finding]:
    parts = urlsplit(origin.strip())
    host = (parts.hostname or "").lower()
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        yield Finding("runtime_origin_not_origin", key, f"{key} has a path, query or fragment; "
                      "an origin is scheme://host[:port] only.",
                      f"Set {key} to {parts.scheme}://{parts.netloc} and the path in "
                      "SVC_RUNTIME_APP_PATH.")
    if apps_domain and (host == apps_domain or host.endswith(f".{apps_domain}")):
        yield Finding("runtime_origin_proxy_host", key, f"{key} is the service's proxy host "
                      f"({host}); the proxy forwards to your origin, so it cannot be it.",
                      f"Set {key} to the developer-owned origin you deployed to (e.g. your "
                      "Worker's https:// URL).")


def _return_url_findings(url: str, slug: str, apps_domain: str | None) -> Iterator[Finding]:
    parts = urlsplit(url)
    expected = (f"https://{slug}.{apps_domain}{RETURN_PATH}?app={slug}" if apps_domain
                else f"https://{slug}.<apps_domain>{RETURN_PATH}?app={slug}")
    host_ok = (parts.hostname or "").startswith(f"{slug}.")
    if not host_ok or parts.path != RETURN_PATH or parse_qs(parts.query).get("app") != [slug]:
        yield Finding("return_url_mismatch", "SVC_RETURN_URL", "In production the return URL "
                      f"is the app's runtime host and {RETURN_PATH} for app '{slug}'.",
                      f"Set SVC_RETURN_URL={expected}.")


def _database_findings(url: str, strict: bool) -> Iterator[Finding]:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        host = None
    if strict and host and _private_kind(host) == "loopback":
        # A database beside the app may well listen on loopback, so this only warns; the
        # value is never shown because it usually carries a password.
        yield Finding("database_on_loopback", "DATABASE_URL", "DATABASE_URL points at this "
                      "machine; a deployed Worker or container has no database there unless "
                      "you run one beside it.", "Point DATABASE_URL at your durable "
                      "inventory store.", level="warning")


def _pay_to_findings(key: str, value: str) -> Iterator[Finding]:
    if _PAY_TO.fullmatch(value.strip()) is None:
        yield Finding("pay_to_invalid", key, f"{key} is not a Base address (0x and 40 hex "
                      "digits).", f"Set {key} to the app's recipient address, as "
                      "`svc app show` prints it.")


def _secret_findings(key: str, value: str, prefix: str, strict: bool) -> Iterator[Finding]:
    if not value.startswith(prefix) or _PLACEHOLDER.search(value):
        level = "error" if strict else "warning"
        where = ("`svc keys create` (shown once)" if key == "SVC_API_KEY"
                 else _WEBHOOK_SIGNING_COMMANDS + " (shown once)")
        yield Finding("secret_placeholder", key, f"{key} is a placeholder or masked value, "
                      f"not a {prefix} secret; masked values never work.",
                      f"Put the real secret from {where} in your deployment's secret store.",
                      level=level)
