"""``svc product list|diff|upsert|update|create`` (spec 2.3, 4.10).

Prices: ``--price`` takes USD (``0.05``, converted exactly to 50000 atomic units) and
``--price-atomic`` takes atomic units; the service only ever receives integer strings.
``diff`` and ``upsert --file`` read the products file (``--file``, else ``products_file``
in ``svc.toml``); ``upsert`` creates and changes, and never removes a product.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from svc.amount_flags import PRODUCT_PRICE
from svc.amounts import AmountError, atomic_to_usd, parse_atomic, usd_to_atomic
from svc.client import ApiFailure, DeveloperClient
from svc.commands.target import app_option, app_path, client_for_app, segment
from svc.errors import ExitCode, usage
from svc.output import Output
from svc.product_batch import apply_at_once, as_config, kept_warnings
from svc.product_plan import Change, change_lines, load_products, normalized, plan
from svc.product_steps import StoppedMidway, apply_one_by_one, check_before_sending
from svc.project import read_project


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    target = app_option()
    source = argparse.ArgumentParser(add_help=False)
    source.add_argument("--file", type=Path, metavar="FILE",
                        help="products JSON (else products_file in svc.toml)")
    fields = argparse.ArgumentParser(add_help=False)
    fields.add_argument("--name")
    fields.add_argument("--sku", help="the match key (default: the slug)")
    prices = fields.add_mutually_exclusive_group()
    prices.add_argument("--price", metavar="USD", help="price in USD, e.g. 0.05 (6 decimals)")
    prices.add_argument("--price-atomic", metavar="N", help="price in atomic units, e.g. 50000")
    fields.add_argument("--risk-mode", choices=["optimistic", "settled_first"])
    fields.add_argument("--status", choices=["active", "disabled"])
    commands = groups.add_parser("product", help="the app's products").add_subparsers(
        metavar="COMMAND", required=True)
    commands.add_parser("list", parents=[common, target],
                        help="list products (needs apps:read)").set_defaults(run=list_products)
    commands.add_parser("diff", parents=[common, target, source],
                        help="compare the products file with the service: + new, ~ changed, "
                        "- only on the service (needs apps:read)").set_defaults(run=diff)
    upsert = commands.add_parser(
        "upsert", parents=[common, target, source, fields],
        help="create or change products from the file, or the one --product names "
        "(needs apps:read, products:write)")
    upsert.add_argument("--product", metavar="SLUG", help="one product from flags")
    upsert.set_defaults(run=upsert_products)
    create = commands.add_parser("create", parents=[common, target, fields],
                                 help="create a product (needs products:write)")
    create.add_argument("--product", metavar="SLUG", help="the new product's slug")
    create.add_argument("--template", help="zent, retry_continue, unlock_level, "
                        "generate_once, export_download, tip_creator")
    create.set_defaults(run=create_product)
    update = commands.add_parser("update", parents=[common, target, fields],
                                 help="change a product (needs products:write)")
    update.add_argument("--product", metavar="SLUG_OR_ID", required=True)
    update.add_argument("--slug", help="a new slug")
    update.set_defaults(run=update_product)


def list_products(args: argparse.Namespace, out: Output) -> int:
    client, slug = client_for_app(args)
    with client:
        products = _products(client, slug)
    out.emit({"app": slug, "products": products}, [product_line(p) for p in products]
             or [f"No products on {slug}."])
    return ExitCode.OK


def diff(args: argparse.Namespace, out: Output) -> int:
    wanted = load_products(_products_file(args))
    client, slug = client_for_app(args)
    with client:
        changes = plan(wanted, _products(client, slug))
    out.emit({"app": slug, "inSync": not changes, "changes": [c.as_json() for c in changes]},
             change_lines(changes) or [f"{slug}: the service matches the file."])
    return ExitCode.OK


def upsert_products(args: argparse.Namespace, out: Output) -> int:
    if args.product:
        wanted = [normalized({"slug": args.product, **_flag_fields(args)}, "--product")]
    else:
        wanted = load_products(_products_file(args))
    client, slug = client_for_app(args)
    revision: dict[str, Any] | None = None
    with client, _price_flags_named(args, from_flags=bool(args.product)):
        current = _products(client, slug)
        changes = plan(wanted, current)
        if args.product:  # one product named: the others are not this command's business
            changes = [c for c in changes if c.kind != "-"]
        sent = [c for c in changes if c.kind != "-"]
        # Several changes go together or not at all: one config apply when it can carry
        # them (svc/product_batch.py), else one by one, checked first (svc/product_steps.py).
        document = as_config(slug, sent, current) if len(sent) > 1 else None
        try:
            if document is not None:
                answer = apply_at_once(client, document, sent)
                warnings, revision = kept_warnings(answer["warnings"]), answer["revision"]
                if revision is None:  # the service found nothing to change after all
                    sent = []
            else:
                if len(sent) > 1:
                    check_before_sending(sent, current)
                warnings = apply_one_by_one(client, slug, sent)
        except StoppedMidway as stopped:
            return out.report(
                {**_upserted(slug, stopped.applied, changes, stopped.warnings, None),
                 **stopped.as_json()},
                [*change_lines(changes), *stopped.lines(), *warning_lines(stopped.warnings)],
                stopped.error)
    return out.report(_upserted(slug, sent, changes, warnings, revision),
                      [*change_lines(changes), _outcome(slug, sent, revision),
                       *warning_lines(warnings)])


def _outcome(slug: str, sent: list[Change], revision: dict[str, Any] | None) -> str:
    if not sent:
        return f"{slug}: products already match; nothing changed."
    if revision is None:
        return f"{len(sent)} change(s) applied."
    return (f"{len(sent)} change(s) applied together, as config revision "
            f"{revision['number']} ({revision['id']}).")


def _upserted(slug: str, applied: list[Change], changes: list[Change],
              warnings: list[dict[str, Any]], revision: dict[str, Any] | None
              ) -> dict[str, Any]:
    """``--json``'s answer; ``revision`` (id and number) when the changes went as one
    config apply."""
    return {"app": slug, "applied": [c.as_json() for c in applied],
            "untouched": [c.as_json() for c in changes if c.kind == "-"], "warnings": warnings,
            "revision": {"id": revision["id"], "number": revision["number"]} if revision
            else None}


def create_product(args: argparse.Namespace, out: Output) -> int:
    body = _flag_fields(args)
    if args.product:
        body["slug"] = args.product
    if args.template:
        body["template"] = args.template
    if not args.template and not ({"slug", "name", "priceAtomic"} <= set(body)):
        raise usage("A product needs --product SLUG, --name and --price (or --price-atomic), "
                    "or a --template.")
    client, slug = client_for_app(args)
    with client, _price_flags_named(args):
        product = client.call("POST", app_path(slug, "products"), body)["product"]
    out.emit({"app": slug, "product": product}, [f"Created {product_line(product)}",
                                                 f"  payment route: {product['paymentRoute']}"])
    return ExitCode.OK


def update_product(args: argparse.Namespace, out: Output) -> int:
    body = _flag_fields(args)
    if args.slug:
        body["slug"] = args.slug
    if not body:
        raise usage("Nothing to change: give --name, --slug, --sku, --price, --price-atomic, "
                    "--risk-mode or --status.")
    client, slug = client_for_app(args)
    with client, _price_flags_named(args):
        answer = client.call("PATCH", app_path(slug, f"products/{segment(args.product)}"),
                             body)
    product, warnings = answer["product"], answer.get("warnings") or []
    out.emit({"app": slug, "product": product, "changed": sorted(body), "warnings": warnings},
             [f"Updated {product_line(product)}", *warning_lines(warnings)])
    return ExitCode.OK


def warning_lines(warnings: list[dict[str, str]]) -> list[str]:
    """The service's warnings (a rename moves the payment route), as config plan shows them."""
    return ["Warnings:", *(f"  {w['key']}: {w['message']}" for w in warnings)] if warnings else []


def product_line(product: dict[str, Any]) -> str:
    price = int(product["priceAtomic"])
    return (f"{product['slug']}  sku {product['sku']}  {product['name']}  "
            f"{atomic_to_usd(price)} USD ({price} atomic)  {product['pricing']}  "
            f"{product['status']}")


def price_atomic(usd: str | None, atomic: str | None) -> str | None:
    """The ``--price`` / ``--price-atomic`` flag as an integer string, or ``None``."""
    try:
        if usd is not None:
            return str(usd_to_atomic(usd))
        if atomic is not None:
            return str(parse_atomic(atomic))
    except AmountError as exc:
        raise usage(str(exc)) from exc
    return None


@contextmanager
def _price_flags_named(args: argparse.Namespace, *, from_flags: bool = True) -> Iterator[None]:
    """The service's refusals of ``priceAtomic`` name the flag that set it (a products file
    names the field itself, so its refusals are left as they are)."""
    try:
        yield
    except ApiFailure as answer:
        if not from_flags or answer.body.get("field") != PRODUCT_PRICE.field:
            raise
        sent = price_atomic(args.price, args.price_atomic)
        message = PRODUCT_PRICE.named(answer.message, args.price, args.price_atomic,
                                      None if sent is None else int(sent))
        raise ApiFailure(answer.status, {**answer.body, "message": message}) from None


def _flag_fields(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"name": args.name, "sku": args.sku, "riskMode": args.risk_mode,
                            "status": args.status,
                            "priceAtomic": price_atomic(args.price, args.price_atomic)}
    return {k: v for k, v in body.items() if v is not None}


def _products(client: DeveloperClient, slug: str) -> list[dict[str, Any]]:
    products: list[dict[str, Any]] = client.call("GET", app_path(slug, "products"))["products"]
    return products


def _products_file(args: argparse.Namespace) -> Path:
    path: Path | None = args.file or read_project(Path.cwd()).products_path()
    if path is None:
        raise usage("Which products file? Pass --file FILE or set products_file in svc.toml.")
    return path
