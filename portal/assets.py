"""Our own static files (``portal/static``): the portal pages' scripts and styles, and the
runtime modal SDK. Nothing is loaded from a third-party CDN.

Read once when the portal is built. Page assets are addressed with a content hash
(``/assets/<name>?v=<hash>``) so they can be cached for a year; the SDK keeps one stable
URL for runtimes to embed, with a short cache.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
SDK_NAME = "svc-modal.js"
SDK_CONFIG_PLACEHOLDER = '"__SVC_CONFIG__"'


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    version: str


class Assets:
    def __init__(self, sdk_config: dict[str, str]) -> None:
        folder = resources.files("portal") / "static"
        self._files: dict[str, Asset] = {}
        for entry in folder.iterdir():
            suffix = "." + entry.name.rsplit(".", 1)[-1]
            if suffix not in TYPES:
                continue
            body = entry.read_bytes()
            if entry.name == SDK_NAME:
                # The deployment's portal and API origins, so runtimes embed one script tag.
                body = body.replace(SDK_CONFIG_PLACEHOLDER.encode(),
                                    json.dumps(sdk_config, sort_keys=True).encode())
            self._files[entry.name] = Asset(body, TYPES[suffix],
                                            hashlib.sha256(body).hexdigest()[:12])

    def url(self, name: str) -> str:
        return f"/assets/{name}?v={self._files[name].version}"

    def serve(self, request: Request) -> Response:
        asset = self._files.get(request.path_params["name"])
        if asset is None or request.path_params["name"] == SDK_NAME:
            return Response("Not found", status_code=404, media_type="text/plain")
        fresh = request.query_params.get("v") == asset.version
        return Response(asset.body, media_type=asset.content_type, headers={
            "cache-control": "public, max-age=31536000, immutable" if fresh
                             else "public, max-age=300",
            "x-content-type-options": "nosniff",
            "cross-origin-resource-policy": "same-origin"})

    def serve_sdk(self, request: Request) -> Response:
        """The modal script runtimes load from their own pages (another origin)."""
        asset = self._files[SDK_NAME]
        return Response(asset.body, media_type=asset.content_type, headers={
            "cache-control": "public, max-age=300", "x-content-type-options": "nosniff",
            "cross-origin-resource-policy": "cross-origin",
            "access-control-allow-origin": "*", "etag": f'"{asset.version}"'})
