"""What a rollback to a revision applies, and what its plan should warn about.

A revision with a recorded state (``payments.config.state``) is rolled back by planning
that state in mirror mode: every field it names is set to its value then, and an active
product or an enabled webhook endpoint it does not list (created or re-enabled since) is
disabled, and so is a runtime it does not have (configured since; disabled, never removed:
``svc runtime verify`` turns it on again), so the app is as that revision left it. A
revision recorded before states were kept (or whose state was not recordable) has only the
document as sent: its rollback applies that, in its own mode, as rollbacks always did, and
the plan says that fields and resources the document left out keep their current values.
Refusing instead would take away the only undo such a revision has; the plan shows exactly
what it will do. A revision whose secrets were withheld (migrations 0018 and 0021:
credentials in URLs, values that look like secrets) is refused outright
(``config_revision_withheld``): restoring it would write the mark where they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from payments.config.document import WITHHELD, withheld_paths
from payments.config.models import ConfigRevision
from payments.errors import ApiError
from payments.models import App

STATE_MODE = "mirror"  # a state lists everything active; what it leaves out is disabled


@dataclass(frozen=True)
class RollbackTarget:
    document: dict[str, Any]
    mode: str
    warnings: list[dict[str, str]] = field(default_factory=list)
    restores_state: bool = False  # ``document`` is the revision's state (make_plan)


def rollback_target(revision: ConfigRevision, app: App) -> RollbackTarget:
    """The document and mode a rollback to ``revision`` plans, under the app's slug now;
    ``config_revision_withheld`` when what it would restore had a credential withheld."""
    _refuse_withheld(revision)
    if revision.state is None:
        return RollbackTarget(_named(revision.config, app.slug), revision.mode, [{
            "code": "rollback_without_state", "key": revision.id,
            "message": f"Revision {revision.number} recorded no state of the app (it was "
                       "applied before revisions kept one, or a value then looked like a "
                       "secret): this rollback applies its config as sent, in "
                       f"{revision.mode} mode, so fields and resources that config left out "
                       "keep their current values."}])
    document = _named(revision.state, app.slug)
    return RollbackTarget(document, STATE_MODE, _kept(document, app, revision.number),
                          restores_state=True)


def rollback_withheld(config: dict[str, Any], state: dict[str, Any] | None) -> list[str]:
    """The paths in what a rollback to a revision would restore (its ``state``; without
    one, its ``config`` as sent) that hold WITHHELD: where it recorded a secret (before the
    guard refused them) that migrations 0018 and 0021 withheld. A rollback to a revision
    with any is refused; the revision views list them (``withheldPaths``) so the console's
    page and ``svc config revisions`` can say so before anyone tries."""
    return withheld_paths(config if state is None else state)


def _refuse_withheld(revision: ConfigRevision) -> None:
    """A secret this revision recorded (a credential in a URL, a value that looks like a
    secret, before the guard refused them) was withheld by migration 0018 or 0021: restoring
    it would write the mark where the secret was, a webhook or Entry URL, a product's
    fulfillment config. Refused, by path, before the guard, whose own refusal of the mark
    would not say where it came from."""
    paths = rollback_withheld(revision.config, revision.state)
    if paths:
        raise ApiError(
            "config_revision_withheld", 422, f"Revision {revision.number} recorded values "
            "that look like secrets (before the secret guard refused them), and they were "
            f"withheld from it since: a rollback to it would write '{WITHHELD}' where they were "
            f"({len(paths)} place{'s' if len(paths) > 1 else ''}, listed in errors), so it is "
            "refused. Nothing was changed. To go back to it, apply a config with the values "
            "you want, keeping credentials in your deployment's environment.",
            errors=[{"path": path, "code": "config_revision_withheld",
                     "message": "A secret recorded here was withheld from this revision."}
                    for path in paths])


def _named(document: dict[str, Any], slug: str) -> dict[str, Any]:
    return {**document, "app": {**document["app"], "slug": slug}}


def _kept(state: dict[str, Any], app: App, number: int) -> list[dict[str, str]]:
    """What the app has now that it did not have after revision ``number`` and that no
    config can take away: a pay-to address. (A runtime configured since is disabled by the
    plan itself, an op like any other.)"""
    if "payTo" in state["app"] or app.pay_to is None:
        return []
    return [{"code": "rollback_keeps_field", "key": "app.payTo",
             "message": f"The app had no pay-to address after revision {number}; an address "
                        f"cannot be unbound, so it stays {app.pay_to}."}]
