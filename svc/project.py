"""Where a command's API URL and app come from: flags, then the environment, then the
project's ``svc.toml`` (spec 2.9), then what the stored grant remembers, then defaults.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from svc.errors import usage

DEFAULT_API_URL = "http://api.localhost:8000"
API_URL_ENV = "SVC_API_URL"
PROJECT_FILE = "svc.toml"


@dataclass(frozen=True)
class Project:
    """The fields of ``svc.toml`` (spec 2.9); absent ones are ``None``.

    ``path`` is the file read, when there was one: the products file is relative to it.
    """

    api_url: str | None = None
    app: str | None = None
    entry_url: str | None = None
    pay_to: str | None = None
    webhook_url: str | None = None
    products_file: str | None = None
    runtime_origin: str | None = None
    path: Path | None = None

    def products_path(self) -> Path | None:
        if self.products_file is None:
            return None
        base = self.path.parent if self.path is not None else Path.cwd()
        return base / self.products_file


def read_project(directory: Path) -> Project:
    path = directory / PROJECT_FILE
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return Project()
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise usage(f"{path} is not readable TOML: {exc}") from exc
    runtime = data.get("runtime", {})
    if not isinstance(runtime, dict):
        raise usage(f"{path}: [runtime] must be a table")
    return Project(api_url=_text(data, "api_url", path),
                   app=_text(data, "app_slug", path) or _text(data, "app", path),
                   entry_url=_text(data, "entry_url", path), pay_to=_text(data, "pay_to", path),
                   webhook_url=_text(data, "webhook_url", path),
                   products_file=_text(data, "products_file", path),
                   runtime_origin=_text(runtime, "origin", path), path=path)


def _text(data: dict[str, Any], key: str, path: Path) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise usage(f"{path}: '{key}' must be a non-empty string")
    return value.strip()


def choose_api_url(flag: str | None, env: str | None, project: Project,
                   remembered: str | None = None) -> str:
    """The first of flag, environment, ``svc.toml``, the grant's own URL, the default."""
    for candidate in (flag, env, project.api_url, remembered):
        if candidate:
            return checked_api_url(candidate)
    return DEFAULT_API_URL


def checked_api_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise usage(f"'{url}' is not an API URL; expected e.g. {DEFAULT_API_URL}")
    return url.strip().rstrip("/")


def choose_app(flag: str | None, project: Project, remembered: str | None = None) -> str | None:
    return flag or project.app or remembered


def api_url_from_environment(flag: str | None, remembered: str | None = None) -> str:
    return choose_api_url(flag, os.environ.get(API_URL_ENV), read_project(Path.cwd()),
                          remembered)
