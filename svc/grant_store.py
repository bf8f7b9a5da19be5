"""The CLI grant on disk: ``$SVC_CONFIG_DIR/grant.json`` (default ``~/.config/svc``).

The file holds a bearer token, so it is only ever readable by its owner: the directory
is 0700, and the file is written to a 0600 temporary file first and moved into place,
so no reader ever sees a half-written grant or a moment with wider permissions.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_DIR_ENV = "SVC_CONFIG_DIR"
GRANT_FILE = "grant.json"


@dataclass(frozen=True)
class StoredGrant:
    token: str
    api_url: str
    app: str
    scopes: tuple[str, ...]
    expires_at: str  # ISO 8601, as the service wrote it
    grant_id: str = ""

    @property
    def masked_token(self) -> str:
        return mask_token(self.token)

    def public(self) -> dict[str, Any]:
        """Everything but the secret, for printing."""
        return {"app": self.app, "scopes": list(self.scopes), "expiresAt": self.expires_at,
                "grantId": self.grant_id, "apiUrl": self.api_url, "token": self.masked_token}


def mask_token(token: str) -> str:
    """``zcli_…1a2b``: enough to tell two grants apart, useless as a credential. The
    service's masked form (``zpk_test_…2398``, ``zwhsec_…aea7``), so every preview the CLI
    prints looks alike."""
    prefix = token.split("_", 1)[0] + "_" if "_" in token else ""
    return f"{prefix}…{token[-4:]}" if len(token) > len(prefix) + 8 else "…"


def default_config_dir() -> Path:
    configured = os.environ.get(CONFIG_DIR_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "svc"


class GrantStore:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else default_config_dir()
        self.path = self.directory / GRANT_FILE

    def load(self) -> StoredGrant | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return StoredGrant(token=data["token"], api_url=data["apiUrl"], app=data["app"],
                               scopes=tuple(data["scopes"]), expires_at=data["expiresAt"],
                               grant_id=data.get("grantId", ""))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            return None  # a damaged file is as good as none; signing in rewrites it

    def save(self, grant: StoredGrant) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)  # mkdir's mode is masked by umask; an old dir stays
        record = {"token": grant.token, "apiUrl": grant.api_url, "app": grant.app,
                  "scopes": list(grant.scopes), "expiresAt": grant.expires_at,
                  "grantId": grant.grant_id}
        temporary = self.directory / f".{GRANT_FILE}.{secrets.token_hex(6)}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), 0o600)  # exactly 0600, whatever the umask
                json.dump(record, handle, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            raise

    def delete(self) -> bool:
        """Remove the grant file; ``False`` when there was none."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

