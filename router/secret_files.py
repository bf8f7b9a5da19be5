"""Secrets read from files: ``SVCSRV_<NAME>_FILE`` names a file that holds the value (a
Docker or Kubernetes secret mounted read-only), so the secret need not sit in the
environment, which ``docker inspect`` and ``/proc/<pid>/environ`` show to anyone allowed to
look at the process."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from router.settings_checks import ENV_PREFIX, SettingsError

# The settings that hold a secret, or a URL that often carries one (a password, an API key).
FROM_FILES = ("secret_key", "relayer_key", "smtp_password", "database_url", "chain_rpc_url",
              "redis_url")


def with_secret_files(env: Mapping[str, str]) -> Mapping[str, str]:
    """``env`` with each ``SVCSRV_<NAME>_FILE`` read into ``SVCSRV_<NAME>``. Setting both is
    refused (which one was meant?); a file that cannot be read is refused naming the
    variable and the path, never the content. The file's trailing newline is not part of
    the value (``echo secret > file`` writes one)."""
    read: dict[str, str] = {}
    for field in FROM_FILES:
        name = ENV_PREFIX + field.upper()
        path = env.get(name + "_FILE")
        if path is None:
            continue
        if env.get(name) is not None:
            raise SettingsError(f"set {name} or {name}_FILE, not both")
        try:
            read[name] = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise SettingsError(f"{name}_FILE: cannot read {path!r} ({reason})") from None
        if not read[name]:
            raise SettingsError(f"{name}_FILE: {path!r} is empty")
    return {**env, **read} if read else env
