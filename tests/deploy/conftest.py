"""The topology of a test module: started once per module (15-20 s on the 2-core machine
under other work), stopped after its last test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from ops.cluster.processes import free_port
from ops.cluster.topology import Cluster, Options
from payments.db import make_engine, make_sessionmaker


@pytest.fixture(scope="module")
def cluster_settings() -> dict[str, str]:
    """Extra ``SVCSRV_*`` settings (without the prefix) for every process of the module's
    topology: a module overrides this fixture to shorten its timers."""
    return {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            cluster_settings: dict[str, str]) -> Iterator[Cluster]:
    running = Cluster(Options(root=tmp_path_factory.mktemp("cluster"), edge_port=free_port(),
                              durable=False, settings=cluster_settings))
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def sessions(cluster: Cluster) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(cluster.database_url, pool_size=2)
    yield make_sessionmaker(engine)
    engine.dispose()
