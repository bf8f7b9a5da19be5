"""``svc order create``: an order through the backend API with a ``zpk_`` key (spec 4.2).

A CLI grant is not an API key (spec 5.3 item 4): the key comes from ``SVC_API_KEY``, or
from ``--env-file`` when one is named, and is never printed. ``--product`` takes the
product id (``zprod_...``), or a slug that the signed-in grant resolves to the id.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from svc.amount_flags import ORDER_AMOUNT
from svc.amounts import AmountError, parse_atomic, usd_to_atomic
from svc.backend import BackendClient, BackendError, new_idempotency_key
from svc.commands.grant import signed_in
from svc.commands.target import app_of, app_option, app_path
from svc.env_file import read_env_file
from svc.errors import CliError, ExitCode, for_api_failure, usage
from svc.grant_store import GrantStore
from svc.output import Output
from svc.project import api_url_from_environment

KEY_VARIABLE = "SVC_API_KEY"
PRODUCT_ID_PREFIX = "zprod_"


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    commands = groups.add_parser("order", help="orders (with a backend API key)"
                                 ).add_subparsers(metavar="COMMAND", required=True)
    create = commands.add_parser("create", parents=[common, app_option()],
                                 help="create an order (key scope orders:create)")
    create.add_argument("--product", required=True, metavar="ID_OR_SLUG",
                        help="zprod_... or a product slug (a slug needs `svc auth`)")
    create.add_argument("--developer-user", required=True, metavar="ID",
                        help="your user's id in your app")
    amounts = create.add_mutually_exclusive_group()
    amounts.add_argument("--amount", metavar="USD",
                         help="for dynamic-priced products: USD, e.g. 2.50")
    amounts.add_argument("--amount-atomic", metavar="N", help="the same in atomic units")
    create.add_argument("--idempotency", metavar="KEY",
                        help="replay-safe key; reuse it to retry (default: a new one, printed)")
    create.add_argument("--env-file", type=Path, metavar="FILE",
                        help=f"read {KEY_VARIABLE} from this dotenv file")
    create.set_defaults(run=create_order)


def create_order(args: argparse.Namespace, out: Output) -> int:
    api_key = _api_key(args.env_file)
    key = args.idempotency or new_idempotency_key("svc-cli", args.product)
    amount = _amount(args.amount, args.amount_atomic)
    product_id, api_url = _product_id(args)
    with BackendClient(api_url, api_key) as backend:
        try:
            order = backend.create_order(product_id=product_id,
                                         developer_user_id=args.developer_user,
                                         idempotency_key=key, amount_atomic=amount)
        except BackendError as answer:
            raise _key_failure(answer) or _failure(answer, args, amount) from None
    out.emit({**order.raw, "idempotencyKey": key}, [
        f"Created order {order.id} ({order.status}): {order.amount_atomic} atomic",
        f"  payment route:   {order.payment_url}",
        f"  idempotency key: {key} (reuse it to retry safely)"])
    return ExitCode.OK


def _api_key(env_file: Path | None) -> str:
    key = read_env_file(env_file).get(KEY_VARIABLE) if env_file else os.environ.get(
        KEY_VARIABLE)
    where = str(env_file) if env_file else "the environment"
    if not key:
        raise usage(f"No {KEY_VARIABLE} in {where}. Orders need a backend zpk_ key with "
                    "orders:create: `svc keys create --scopes orders:create`.")
    if not key.startswith("zpk_") or "…" in key or "..." in key:
        raise usage(f"{KEY_VARIABLE} in {where} is not a zpk_ secret (a masked preview "
                    "never works); use the secret `svc keys create` showed once.")
    return key


def _failure(answer: BackendError, args: argparse.Namespace, amount: int | None) -> CliError:
    """Any other refusal, mapped like the developer API's (validation is a usage error)."""
    errors = [{k: str(e.get(k, "")) for k in ("path", "code", "message")}
              for e in answer.body.get("errors") or [] if isinstance(e, dict)]
    message = answer.message
    if answer.body.get("field") == ORDER_AMOUNT.field:  # the person typed a flag
        message = ORDER_AMOUNT.named(message, args.amount, args.amount_atomic, amount)
    return for_api_failure(answer.status, answer.code or f"http_{answer.status}", message,
                           None, errors)


def _key_failure(answer: BackendError) -> CliError | None:
    """The key's refusals in the key's terms: a CLI sign-in would not help here."""
    if answer.code == "valid_api_key_required":
        return CliError(f"{answer.message} Check {KEY_VARIABLE}: it must be a live, unrevoked "
                        "zpk_ secret of this app.", ExitCode.SIGN_IN, code=answer.code)
    if answer.code == "api_key_scope_missing":
        return CliError(f"{answer.message} Create a key that has it.", ExitCode.SCOPE,
                        code=answer.code, command="svc keys create --scopes orders:create")
    return None


def _amount(usd: str | None, atomic: str | None) -> int | None:
    try:
        if usd is not None:
            return usd_to_atomic(usd)
        return None if atomic is None else parse_atomic(atomic)
    except AmountError as exc:
        raise usage(str(exc)) from exc


def _product_id(args: argparse.Namespace) -> tuple[str, str]:
    """The product id and the API URL; a slug is looked up with the stored grant."""
    if args.product.startswith(PRODUCT_ID_PREFIX):
        stored = GrantStore().load()
        return args.product, api_url_from_environment(args.api_url,
                                                      stored.api_url if stored else None)
    client, stored = signed_in(args)
    slug = app_of(args, stored)
    with client:
        products = client.call("GET", app_path(slug, "products"))["products"]
    for product in products:
        if product["slug"] == args.product:
            return str(product["id"]), client.api_url
    raise CliError(f"{slug} has no product '{args.product}'; `svc product list` shows them.",
                   ExitCode.USAGE, code="product_not_found")
