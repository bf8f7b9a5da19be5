"""A CLI grant issued the way the device flow issues it (request, console approval,
redeem: the ledger's own functions) and saved where ``svc`` keeps it. For tests of the
commands a grant allows: the device flow itself, whose first poll waits its 2 s interval,
is tested once, in tests/svc/test_cli_end_to_end.py."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction, utcnow
from payments.developer import grants
from payments.models import App
from svc.grant_store import GrantStore, StoredGrant


def issue_grant(sessions: sessionmaker[Session], developer_id: str, app: str,
                scopes: list[str], ttl_seconds: int = 7200) -> StoredGrant:
    """The grant ``svc auth device --app APP --scopes ...`` ends with, once approved (its
    ``api_url`` left empty: :func:`save_grant` names it)."""
    with transaction(sessions) as session:
        now = utcnow()
        started = grants.start_request(session, app_slug=app, scopes=scopes,
                                       ttl_seconds=ttl_seconds, now=now)
        # As the console's approval finds it: by the code the CLI shows.
        record = grants.pending_request(session, started.record.user_code, now)
        target = session.scalars(select(App).where(App.slug == app)).one()
        grants.approve(record, developer_id=developer_id, app=target)
        issued = grants.redeem(session, started.device_code, now)
        return StoredGrant(token=issued.token, api_url="", app=app,
                           scopes=tuple(issued.grant.scopes),
                           expires_at=issued.grant.expires_at.isoformat(),
                           grant_id=issued.grant.id)


def save_grant(sessions: sessionmaker[Session], developer_id: str, app: str, scopes: str,
               config_dir: Path, api_url: str) -> None:
    """Signed in as ``svc auth device`` leaves the CLI: the grant in ``config_dir``."""
    grant = issue_grant(sessions, developer_id, app, scopes.split(","))
    GrantStore(config_dir).save(StoredGrant(
        token=grant.token, api_url=api_url, app=grant.app, scopes=grant.scopes,
        expires_at=grant.expires_at, grant_id=grant.grant_id))
