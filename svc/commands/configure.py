"""``svc configure``: the legacy command (spec 4.10, 9 item 4), kept for old integrations.

It reads ``svc.toml`` (``app_slug``, ``entry_url``, ``pay_to``, ``webhook_url``,
``[runtime] origin``) and its ``products_file``, maps them onto an ``svc.config.v1``
document, and plans and applies it as ``svc config apply --mode merge --yes`` would: old
integrations ran it unattended, so it asks nothing. Every run says, on stderr, to move to
``svc config``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from svc.commands.config_flow import (
    CONFIG,
    CONFIG_TIMEOUT,
    Proposal,
    apply_body,
    carry_out,
    request_plan,
)
from svc.commands.grant import signed_in
from svc.config_sources import from_project, refuse_secrets
from svc.output import Output
from svc.product_plan import load_products
from svc.project import read_project

DEPRECATION = ("svc: `svc configure` is deprecated and will be removed. Move to `svc config`: "
               "`svc config init` writes svc.config.json from your app once, then `svc config "
               "plan` and `svc config apply` (see config.md).")


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    configure = groups.add_parser(
        "configure", parents=[common],
        help="deprecated: apply svc.toml and its products file (use `svc config`)")
    configure.add_argument("--app", metavar="SLUG", help="app slug (else app_slug in svc.toml)")
    configure.add_argument("--file", type=Path, metavar="FILE",
                           help="the products file (else products_file in svc.toml)")
    configure.add_argument("--yes", action="store_true",
                           help="accepted for old scripts; configure never asks")
    configure.set_defaults(run=configure_app)


def configure_app(args: argparse.Namespace, out: Output) -> int:
    out.note(DEPRECATION)
    project = read_project(Path.cwd())
    if args.app:
        project = replace(project, app=args.app)
    products_file = args.file or project.products_path()
    products = load_products(products_file) if products_file is not None else None
    document, notes = from_project(project, products)
    refuse_secrets(document, "svc.toml and its products file", "Nothing was sent.")
    if not out.as_json:
        for note in notes:
            out.note(f"svc: {note}")
    client, _ = signed_in(args, CONFIG_TIMEOUT)
    with client:
        planned = request_plan(client, document, "merge")
        return carry_out(out, Proposal(
            planned, {"productsFile": str(products_file) if products_file else None,
                      "config": document, "notes": notes},
            lambda: client.call("POST", f"{CONFIG}/apply", apply_body(document, planned)),
            question="", again="svc configure"), assume_yes=True)
