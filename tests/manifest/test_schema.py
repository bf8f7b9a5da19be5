"""The runtime manifest schema: valid JSON Schema 2020-12, true of good manifests in every
spelling, false of bad ones, and served by the docs host of a real router."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from manifest.rules import FIELDS
from manifest.schema import FILE_NAME, MEDIA_TYPE, load_schema, published_schema
from tests.manifest.origin import good_manifest
from tests.support.router import router_factory

APP_ID = "zapp_0123456789abcdef0123456789abcd"


def valid(document: Any) -> bool:
    return bool(Draft202012Validator(load_schema()).is_valid(document))


def test_schema_is_2020_12_and_names_every_spelling() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "$id" not in schema  # added by the docs host, which knows its own address
    spellings = {s for _, names, _ in FIELDS for s in names} | {"runtimeOrigin"}
    assert set(schema["properties"]) == spellings
    assert schema["additionalProperties"] is True
    for example in schema["examples"]:
        assert valid(example)


def test_good_manifests_in_every_spelling() -> None:
    assert valid(good_manifest(APP_ID, "space"))
    assert valid(good_manifest(APP_ID, "space", runtimeOrigin="https://game.example.com",
                               extra={"anything": True}))
    for canonical, names, _ in FIELDS:
        for spelling in names[1:]:
            document = good_manifest(APP_ID, "space")
            document[spelling] = document.pop(canonical)
            assert valid(document), spelling


@pytest.mark.parametrize("change", [
    {"appPath": None}, {"entryPath": None}, {"appPath": "play"}, {"entryPath": "//evil.com"},
    {"appPath": "/a/../b"}, {"webhookPath": "/hook"}, {"paymentSubmittedPath": "/x"},
    {"payTo": "0x123"}, {"appId": "app_1"}, {"slug": "Not A Slug"},
    {"runtimeOrigin": "https://game.example.com/path"}, {"runtimeOrigin": None},
])
def test_bad_values_are_invalid(change: dict[str, Any]) -> None:
    assert not valid({**good_manifest(APP_ID, "space"), **change})


@pytest.mark.parametrize("field", ["appId", "slug", "payTo", "webhookPath",
                                   "paymentSubmittedPath"])
def test_every_field_is_required_in_some_spelling(field: str) -> None:
    document = good_manifest(APP_ID, "space")
    del document[field]
    assert not valid(document)


def test_the_paths_may_be_left_out_but_never_null() -> None:
    """Spec 2.8: appPath and entryPath default to "/" (verification compares the default
    with the saved path); null is never accepted, in any spelling."""
    document = good_manifest(APP_ID, "space")
    del document["appPath"], document["entryPath"]
    assert valid(document)
    for spelling in ("appPath", "app_path", "entryPath", "entry_path"):
        assert not valid({**document, spelling: None}), spelling


def test_not_an_object_is_invalid() -> None:
    assert not valid([good_manifest(APP_ID, "space")])


def test_docs_host_serves_the_schema(sqlite_template: Path, tmp_path: Path) -> None:
    shutil.copy(sqlite_template, tmp_path / "svc.db")
    with router_factory(f"sqlite:///{tmp_path / 'svc.db'}")() as router:
        docs = f"docs.localhost:{router.port}"
        response = httpx.get(f"{router.url}/{FILE_NAME}", headers={"host": docs}, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(MEDIA_TYPE)
    body = response.json()
    assert body["$id"] == f"http://docs.localhost:{router.port}/{FILE_NAME}"
    assert body == published_schema(f"http://docs.localhost:{router.port}")
    assert list(body)[:2] == ["$schema", "$id"]


def test_docs_host_root_lists_what_it_serves(sqlite_template: Path, tmp_path: Path) -> None:
    shutil.copy(sqlite_template, tmp_path / "svc.db")
    with router_factory(f"sqlite:///{tmp_path / 'svc.db'}")() as router:
        docs = f"docs.localhost:{router.port}"
        index = httpx.get(f"{router.url}/", headers={"host": docs}, timeout=10)
        assert index.status_code == 200, index.text
        urls = [d["url"] for d in index.json()["documents"]]
        assert all(d["describes"] for d in index.json()["documents"])
        # Every document listed is served from the address given, under this host.
        for url in urls:
            assert url.startswith(f"http://{docs}/")
            served = httpx.get(f"{router.url}{url.removeprefix(f'http://{docs}')}",
                               headers={"host": docs}, timeout=10)
            assert served.status_code == 200, url
    assert sorted(u.rsplit("/", 1)[1] for u in urls) == sorted([
        "openapi.json", "webhook-event.schema.json", "svc-config.v1.schema.json", FILE_NAME])
