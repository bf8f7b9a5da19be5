"""The config API's world: the developer API's (one verified developer, an app "game", a
running router), and the OpenAPI description its calls are checked against."""

from __future__ import annotations

from typing import Any

import pytest

from payments.openapi import openapi_document
from tests.developer.conftest import world
from tests.developer.test_api import World

__all__ = ["description", "world"]


@pytest.fixture
def description(world: World) -> dict[str, Any]:
    return openapi_document(world.router.settings.base_url)
