"""``svc product upsert``'s changes one request at a time, through the product API: for a
single change, and for several that a config apply cannot carry (svc/product_batch.py).

Several changes are checked first for what the CLI can see the service would refuse (a new
product without a name or price, a slug another product holds), so nothing is sent for
those. A refusal the CLI could not foresee, or a request that got no answer, stops the run
at that change: :class:`StoppedMidway` says which changes were made, which one failed, and
which were not sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.commands.target import app_path, segment
from svc.errors import CliError, ExitCode, for_api_failure
from svc.product_plan import Change


@dataclass
class StoppedMidway(Exception):
    """Change ``failed`` of an upsert was refused (or got no answer) after ``applied``
    were made; ``unsent`` were not sent. ``error`` is what stopped it."""

    applied: list[Change]
    failed: Change
    unsent: list[Change]
    error: CliError
    unknown: bool  # no answer: ``failed`` may have been made
    warnings: list[dict[str, Any]]  # the answers' to ``applied``

    def lines(self) -> list[str]:
        total = len(self.applied) + 1 + len(self.unsent)
        how = "got no answer" if self.unknown else "was refused"
        lines = [f"Stopped at change {len(self.applied) + 1} of {total}, which {how}:"]
        lines += [f"  applied:     {describe(c)}" for c in self.applied]
        lines.append(f"  {'unknown:' if self.unknown else 'refused:'}     {describe(self.failed)}"
                     + (" (it may have been made; `svc product diff` shows)"
                        if self.unknown else ""))
        lines += [f"  not applied: {describe(c)}" for c in self.unsent]
        return lines

    def as_json(self) -> dict[str, Any]:
        """``notApplied``: the changes not made (the refused one and those not sent);
        ``unknown``: the one that got no answer, which may have been."""
        refused = [] if self.unknown else [self.failed]
        return {"notApplied": [c.as_json() for c in [*refused, *self.unsent]],
                "unknown": [self.failed.as_json()] if self.unknown else []}


def describe(change: Change) -> str:
    return f"{change.kind} {change.sku} ({change.product.get('slug')})"


def check_before_sending(changes: list[Change], current: list[dict[str, Any]]) -> None:
    """What the product API would refuse of several changes, seen before any is sent."""
    held = {p["slug"]: p["sku"] for p in current}
    for change in changes:
        product, slug = change.product, change.product.get("slug")
        if change.kind == "+" and "template" not in product and (
                product.get("name") is None or product.get("priceAtomic") is None):
            raise CliError(f"Product {change.sku} ({slug}) is new and needs 'name' and "
                           "'priceAtomic' (or a 'template'). Nothing was sent.",
                           ExitCode.USAGE, code="missing_field")
        if slug in held and held[slug] != change.sku:
            raise CliError(f"Product {change.sku} wants the slug '{slug}', which product "
                           f"{held[slug]} holds; rename that one first (`svc product update "
                           f"--product {slug} --slug ...`). Nothing was sent.",
                           ExitCode.FAILED, code="product_exists")


def apply_one_by_one(client: DeveloperClient, slug: str,
                     changes: list[Change]) -> list[dict[str, Any]]:
    """Send each change; the warnings of the answers. Raises :class:`StoppedMidway` when
    one fails after another was sent or with others left, else the failure itself."""
    warnings: list[dict[str, Any]] = []
    for index, change in enumerate(changes):
        try:
            warnings += _send(client, slug, change)
        except (ApiFailure, ServiceUnreachable) as failure:
            if len(changes) == 1:
                raise
            error = (for_api_failure(failure.status, failure.code, failure.message,
                                     _text(failure.body.get("command")), failure.errors)
                     if isinstance(failure, ApiFailure) else
                     CliError(str(failure), ExitCode.NETWORK, code="unreachable"))
            raise StoppedMidway(changes[:index], change, changes[index + 1:], error,
                                isinstance(failure, ServiceUnreachable), warnings) from None
    return warnings


def _send(client: DeveloperClient, slug: str, change: Change) -> list[dict[str, Any]]:
    if change.kind == "+":
        client.call("POST", app_path(slug, "products"), change.product)
        return []
    body = {name: wanted for name, (_, wanted) in change.fields.items()}
    answer = client.call("PATCH", app_path(slug, f"products/{segment(change.product['id'])}"),
                         body)
    found: list[dict[str, Any]] = answer.get("warnings") or []
    return found


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
