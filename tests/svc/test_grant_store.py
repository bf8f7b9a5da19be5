"""The grant file: owner-only permissions, atomic replacement, no token in output."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from svc.grant_store import GrantStore, StoredGrant, default_config_dir, mask_token

TOKEN = "zcli_" + "0123456789abcdef" * 4


def grant(token: str = TOKEN, app: str = "game") -> StoredGrant:
    return StoredGrant(token=token, api_url="http://127.0.0.1:9", app=app,
                       scopes=("apps:read", "keys:create"),
                       expires_at="2030-01-01T00:00:00+00:00", grant_id="zclig_1")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_file_is_0600_in_a_0700_directory_whatever_the_umask(tmp_path: Path) -> None:
    store = GrantStore(tmp_path / "config" / "svc")
    previous = os.umask(0o000)  # the most permissive umask must not widen anything
    try:
        store.save(grant())
    finally:
        os.umask(previous)
    assert mode(store.directory) == 0o700
    assert mode(store.path) == 0o600
    assert store.load() == grant()


def test_an_existing_wider_directory_is_narrowed(tmp_path: Path) -> None:
    directory = tmp_path / "svc"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)  # noqa: S103 - the too-wide directory under test
    GrantStore(directory).save(grant())
    assert mode(directory) == 0o700


def test_save_replaces_atomically_and_leaves_no_temporary(tmp_path: Path) -> None:
    store = GrantStore(tmp_path)
    store.save(grant(app="first"))
    before = store.path.stat().st_ino
    store.save(grant(app="second"))
    # os.replace swaps in a new inode: a reader holds either the old file or the new one.
    assert store.path.stat().st_ino != before
    assert mode(store.path) == 0o600
    loaded = store.load()
    assert loaded is not None and loaded.app == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grant.json"]


def test_a_failed_write_keeps_the_old_grant(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = GrantStore(tmp_path)
    store.save(grant(app="kept"))

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("svc.grant_store.os.replace", broken)
    with pytest.raises(OSError, match="disk full"):
        store.save(grant(app="lost"))
    loaded = store.load()
    assert loaded is not None and loaded.app == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grant.json"]


def test_missing_or_damaged_file_means_signed_out(tmp_path: Path) -> None:
    store = GrantStore(tmp_path)
    assert store.load() is None
    assert store.delete() is False
    store.path.write_text("{not json")
    assert store.load() is None
    assert store.delete() is True


def test_masked_token_shows_only_a_tail() -> None:
    # the service's masked form, as key and signing-secret previews show it
    assert mask_token(TOKEN) == "zcli_…cdef"
    assert mask_token("short") == "…"
    public = grant().public()
    assert public["token"] == "zcli_…cdef"
    assert TOKEN not in str(public)
    assert TOKEN[5:] not in str(public)


def test_config_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SVC_CONFIG_DIR", str(tmp_path / "elsewhere"))
    assert default_config_dir() == tmp_path / "elsewhere"
    assert GrantStore().path == tmp_path / "elsewhere" / "grant.json"
    monkeypatch.delenv("SVC_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_config_dir() == tmp_path / "xdg" / "svc"
