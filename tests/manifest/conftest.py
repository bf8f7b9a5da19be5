"""A test CA (trustme) and HTTPS developer origins on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trustme

from tests.manifest.origin import DeveloperOrigin, developer_origin


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def origin(ca: trustme.CA) -> Iterator[DeveloperOrigin]:
    with developer_origin(ca) as served:
        yield served
