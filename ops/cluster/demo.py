"""The demo app's origin as a process of its own, for the local topology: seeds the ``demo``
app (router.dev.seed_demo) at ``--origin`` in the database of ``SVCSRV_DATABASE_URL``, then
serves examples.demo_origin on ``--port``."""

from __future__ import annotations

import argparse

import uvicorn

from examples.demo_origin import DemoIdentity, demo_origin
from payments.db import make_engine, make_sessionmaker
from router.dev import DEMO_PAY_TO, DEMO_SLUG, seed_demo
from router.settings import load_settings
from svc.int_flags import whole_number


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ops.cluster.demo")
    parser.add_argument("--port", type=whole_number, required=True)
    parser.add_argument("--origin", required=True)
    args = parser.parse_args(argv)
    settings = load_settings()
    engine = make_engine(settings.database_url)
    app_id = seed_demo(make_sessionmaker(engine), args.origin)
    engine.dispose()
    identity = DemoIdentity(app_id=app_id, slug=DEMO_SLUG, pay_to=DEMO_PAY_TO,
                            runtime_origin=args.origin, portal_url=settings.portal_url)
    uvicorn.run(demo_origin(identity), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False, lifespan="off")


if __name__ == "__main__":
    main()
