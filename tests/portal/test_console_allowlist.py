"""The app page's Allowlist row (spec 2.2: ``recipient_allowlist_status``, "shown as
Allowlist"): allowed, or why payments to ``pay_to`` are refused and until when."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from payments.db import transaction
from payments.models import AllowlistStatus, App
from tests.factories import add_owned_app
from tests.portal.conftest import Console, log_in

PAY_TO = "0x" + "ab" * 20
ROW = re.compile(r"<dt>Allowlist</dt><dd>(.*?)</dd>")


def test_the_app_page_shows_the_allowlist_status_and_what_it_means(
        console: Console, developer: tuple[str, str], sessions: sessionmaker[Session]) -> None:
    _, org_id = developer
    app = add_owned_app(sessions, org_id, "game", pay_to=PAY_TO,
                        recipient_allowlist_status=AllowlistStatus.ALLOWED)

    def row(**values: Any) -> str:
        with transaction(sessions) as session:
            session.execute(update(App).where(App.id == app.id).values(**values))
        page = client.get("/apps/game")
        assert page.status_code == 200, page.text
        found = ROW.findall(page.text)
        assert len(found) == 1, page.text
        return str(found[0])

    with console.client() as client:
        log_in(client)
        assert row() == "allowed"  # nothing to explain
        refused = row(recipient_allowlist_status=AllowlistStatus.NOT_ALLOWED)
        assert refused.startswith("not allowed<br>")
        assert "<code>RECIPIENT_NOT_ALLOWLISTED</code>" in refused
        assert "<code>svc-ops allowlist add</code>" in refused
        pending = row(recipient_allowlist_status=AllowlistStatus.UNKNOWN)
        assert pending.startswith("unknown, pending check<br>")
        assert "<code>RECIPIENT_NOT_ALLOWLISTED</code>" in pending and "next cycle" in pending
        unset = row(pay_to=None)
        assert unset.startswith("unknown<br>") and "<code>APP_PAY_TO_INVALID</code>" in unset
