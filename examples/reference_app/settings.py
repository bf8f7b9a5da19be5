"""The reference app's settings: the Worker Quick Launch variables of spec 4.11, checked.

Only these are read, plus the SDK's two service URLs (``svc.service_urls``). Every problem
is collected, so a developer fixes them all in one go; the CLI prints one line each and
exits 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from svc.service_urls import (
    API_URL_ENV,
    PORTAL_URL_ENV,
    ServiceUrlError,
    ServiceUrls,
    checked_origin,
    service_origin,
)

DEFAULT_DATABASE_URL = "sqlite:///reference-app.db"
_APP_ID = re.compile(r"^zapp_[A-Za-z0-9]{4,64}\Z")
_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
_SECRET = re.compile(r"^zwhsec_[A-Za-z0-9_-]{16,200}\Z")
_API_KEY = re.compile(r"^zpk_[A-Za-z0-9_-]{16,200}\Z")
_BAD_PATH = re.compile(r"[\s\\?#]|/\.{1,2}(?:/|$)")


class SettingsError(ValueError):
    """One line per problem, each naming its variable."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Settings:
    app_id: str
    app_slug: str
    pay_to: str
    runtime_origin: str
    return_url: str
    webhook_secret: str
    webhook_url: str
    service: ServiceUrls
    runtime_app_path: str = "/"
    api_key: str | None = None
    database_url: str = DEFAULT_DATABASE_URL

    def __repr__(self) -> str:
        # Settings end up in tracebacks and debug logs: never the secrets (spec 1.4 item 8).
        return (f"Settings(app_id={self.app_id!r}, app_slug={self.app_slug!r}, "
                f"runtime_origin={self.runtime_origin!r}, "
                f"api_key={'set' if self.api_key else None})")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        reader = _Reader(environ)
        app_id = reader.matching("SVC_APP_ID", _APP_ID, "an app id such as zapp_...")
        slug = reader.matching("SVC_APP_SLUG", _SLUG, "an app slug (a-z, 0-9, -)")
        pay_to = reader.matching("SVC_PAY_TO", _ADDRESS, "a 0x address of 40 hex digits")
        origin = reader.origin("SVC_RUNTIME_ORIGIN")
        app_path = reader.app_path("SVC_RUNTIME_APP_PATH")
        return_url = reader.url("SVC_RETURN_URL")
        secret = reader.matching("SVC_WEBHOOK_SECRET", _SECRET, "a zwhsec_ signing secret",
                                 secret=True)
        api_key = reader.optional_key("SVC_API_KEY")
        webhook_url = reader.url("SVC_WEBHOOK_URL")
        database_url = reader.database_url("DATABASE_URL")
        api_url = reader.service(API_URL_ENV)
        portal_url = reader.service(PORTAL_URL_ENV)
        if reader.problems:
            raise SettingsError(reader.problems)
        return cls(app_id=app_id, app_slug=slug, pay_to=pay_to, runtime_origin=origin,
                   runtime_app_path=app_path, return_url=return_url, webhook_secret=secret,
                   api_key=api_key, webhook_url=webhook_url, database_url=database_url,
                   service=ServiceUrls(api_url=api_url, portal_url=portal_url))


class _Reader:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []

    def _get(self, name: str) -> str | None:
        value = self.environ.get(name, "").strip()
        if not value:
            self.problems.append(f"{name}: missing")
            return None
        return value

    def matching(self, name: str, pattern: re.Pattern[str], what: str, *,
                 secret: bool = False) -> str:
        value = self._get(name)
        if value is not None and not pattern.match(value):
            shown = "the value given" if secret else repr(value)
            self.problems.append(f"{name}: {shown} is not {what}")
        return value or ""

    def origin(self, name: str) -> str:
        value = self._get(name)
        if value is None:
            return ""
        try:
            return checked_origin(value, name)
        except ServiceUrlError as exc:
            self.problems.append(str(exc))
            return ""

    def url(self, name: str) -> str:
        value = self._get(name)
        if value is None:
            return ""
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username \
                or parts.password or parts.fragment:
            self.problems.append(f"{name}: {value!r} is not an http(s) URL without "
                                 "credentials or fragment")
        return value

    def app_path(self, name: str) -> str:
        # Spec 4.11: default "/", a concrete path, never null.
        value = self.environ.get(name, "").strip() or "/"
        if not value.startswith("/") or value.startswith("//") or _BAD_PATH.search(value) \
                or len(value) > 512:
            self.problems.append(f"{name}: {value!r} is not a concrete path such as / or /play")
        return value

    def optional_key(self, name: str) -> str | None:
        value = self.environ.get(name, "").strip()
        if not value:
            return None  # optional: the routes that need it answer 503 backend_key_missing
        if not _API_KEY.match(value):
            self.problems.append(f"{name}: the value given is not a zpk_ API key")
        return value

    def database_url(self, name: str) -> str:
        value = self.environ.get(name, "").strip() or DEFAULT_DATABASE_URL
        try:
            url = make_url(value)
        except ArgumentError:
            self.problems.append(f"{name}: not a database URL (sqlite:///file.db or "
                                 "postgresql://user@host/db)")
            return value
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            self.problems.append(f"{name}: {url.get_backend_name()!r} is not supported; "
                                 "use sqlite:/// or postgresql://")
        elif url.get_backend_name() == "postgresql" and url.drivername not in (
                "postgresql", "postgresql+psycopg"):
            self.problems.append(f"{name}: use postgresql:// or postgresql+psycopg://")
        return value

    def service(self, name: str) -> str:
        try:
            return service_origin(self.environ, name)
        except ServiceUrlError as exc:
            self.problems.append(str(exc))
            return ""
