"""``svc keys list|create|update|revoke|pull``: backend API keys (spec 2.6, 5.1).

The full ``zpk_`` secret exists in one answer only, the creation's; this module prints
it there once (in text and in ``--json``) and nowhere else. ``pull`` writes a file of
masked previews and guidance: a masked key is never usable as a key.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from svc.backend_calls import MAX_IDEMPOTENCY_KEY
from svc.commands.key_create import create_once, new_idempotency_key
from svc.commands.target import app_option, app_path, client_for_app, segment
from svc.errors import ExitCode, usage
from svc.output import Output

KEY_SCOPES = ("orders:create", "orders:read", "receipts:read", "deliveries:read",
              "charges:create", "connections:create", "connections:read")
STORAGE_NOTE = ("API key (shown once; keep it server-side as SVC_API_KEY in your backend's "
                "secret store, never in frontend code or a repository):")
PULL_FILE = "svc-keys.env"


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    target = app_option()
    keys = groups.add_parser("keys", help="backend API keys").add_subparsers(
        metavar="COMMAND", required=True)
    keys.add_parser("list", parents=[common, target],
                    help="list the app's API keys (needs apps:read)").set_defaults(
        run=list_keys)
    create = keys.add_parser("create", parents=[common, target],
                             help="create a zpk_ key; its secret is shown once "
                             "(needs keys:create)")
    create.add_argument("--label", default="", help="what the key is for")
    create.add_argument("--scopes", type=_scopes, metavar="A,B",
                        help=f"default: the four v1.2 scopes; any of {', '.join(KEY_SCOPES)}")
    create.add_argument("--env", choices=["test", "live"], default="test",
                        help="the key's environment (default test)")
    create.add_argument("--idempotency", metavar="KEY",
                        help="replay-safe key: a rerun with it makes no second key "
                        "(default: a new one per run, printed if the run fails)")
    create.set_defaults(run=create_key)
    update = keys.add_parser("update", parents=[common, target],
                             help="change a key's label or scopes (needs keys:create)")
    update.add_argument("key", metavar="KEY_ID")
    update.add_argument("--label")
    update.add_argument("--scopes", type=_scopes, metavar="A,B")
    update.set_defaults(run=update_key)
    revoke = keys.add_parser("revoke", parents=[common, target],
                             help="revoke a key at once (needs keys:create)")
    revoke.add_argument("key", metavar="KEY_ID")
    revoke.add_argument("--yes", action="store_true", help="confirm the revocation")
    revoke.set_defaults(run=revoke_key)
    pull = keys.add_parser("pull", parents=[common, target],
                           help="write masked previews and where to get a real key "
                           "(needs apps:read)")
    pull.add_argument("--output", type=Path, default=Path(PULL_FILE), metavar="FILE",
                      help=f"the file to write (default {PULL_FILE})")
    pull.add_argument("--force", action="store_true", help="replace an existing file")
    pull.set_defaults(run=pull_keys)


def list_keys(args: argparse.Namespace, out: Output) -> int:
    client, slug = client_for_app(args)
    with client:
        keys: list[dict[str, Any]] = client.keys(slug)["keys"]
    out.emit({"app": slug, "keys": keys}, [key_line(k) for k in keys]
             or [f"No API keys on {slug}."])
    return ExitCode.OK


def create_key(args: argparse.Namespace, out: Output) -> int:
    idempotency = args.idempotency or new_idempotency_key()
    if not idempotency.strip() or len(idempotency) > MAX_IDEMPOTENCY_KEY:
        raise usage(f"--idempotency must be 1 to {MAX_IDEMPOTENCY_KEY} characters.")
    body: dict[str, Any] = {"label": args.label, "environment": args.env,
                            "idempotencyKey": idempotency}
    if args.scopes is not None:
        body["scopes"] = args.scopes
    client, slug = client_for_app(args)
    with client:
        created = create_once(client, slug, body)
    key, secret = created["key"], created["secret"]
    out.emit({"app": slug, "key": key, "secret": secret, "idempotencyKey": idempotency},
             [f"Created {key_line(key)}", STORAGE_NOTE, f"  {secret}"])
    return ExitCode.OK


def update_key(args: argparse.Namespace, out: Output) -> int:
    body: dict[str, Any] = {}
    if args.label is not None:
        body["label"] = args.label
    if args.scopes is not None:
        body["scopes"] = args.scopes
    if not body:
        raise usage("Nothing to change: give --label and/or --scopes.")
    client, slug = client_for_app(args)
    with client:
        key = client.call("PATCH", app_path(slug, f"keys/{segment(args.key)}"), body)["key"]
    out.emit({"app": slug, "key": key}, [f"Updated {key_line(key)}"])
    return ExitCode.OK


def revoke_key(args: argparse.Namespace, out: Output) -> int:
    if not args.yes:
        raise usage(f"Revoking {args.key} stops every server using it at once. Rerun with "
                    "--yes.")
    client, slug = client_for_app(args)
    with client:
        key = client.call("POST", app_path(slug, f"keys/{segment(args.key)}/revoke"))["key"]
    out.emit({"app": slug, "key": key}, [f"Revoked {key_line(key)}"])
    return ExitCode.OK


def pull_keys(args: argparse.Namespace, out: Output) -> int:
    target: Path = args.output
    if target.exists() and not args.force:
        raise usage(f"{target} exists; pass --force to replace it.")
    client, slug = client_for_app(args)
    with client:
        keys: list[dict[str, Any]] = client.keys(slug)["keys"]
    # 0600 from the start: the file holds no secret, but it is where one will be pasted.
    handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(masked_guidance(slug, keys))
    os.chmod(target, 0o600)  # an existing file (--force) keeps its mode otherwise
    out.emit({"app": slug, "path": str(target), "keys": keys, "usable": False},
             [f"Wrote {target}: masked previews of {len(keys)} key(s) and where to get a real "
              "one. Masked keys do not work as keys."])
    return ExitCode.OK


def masked_guidance(slug: str, keys: list[dict[str, Any]]) -> str:
    """The file ``pull`` writes: previews as comments, and an empty ``SVC_API_KEY``."""
    active = [k for k in keys if not k.get("revokedAt")]
    lines = [f"# API keys of {slug}: masked previews only. A masked key is NOT a usable key.",
             "# The full zpk_ secret is shown once, when the key is created; the service "
             "keeps only its hash.",
             "# To get a usable key: `svc keys create --app "
             f"{slug} --label <purpose>` (or the developer console), then put the",
             "# secret it shows in your backend's secret store as SVC_API_KEY.",
             "#"]
    lines += [f"#   {k['id']}  {k['preview']}  {k['environment']}  {','.join(k['scopes'])}  "
              f"{k['label']}" for k in active] or ["#   (no active keys)"]
    lines += ["", "SVC_API_KEY=", ""]
    return "\n".join(lines)


def key_line(key: dict[str, Any]) -> str:
    return (f"{key['id']}  {key['preview']}  {key['environment']}  "
            f"{','.join(key['scopes']) or '(legacy: no scopes)'}  "
            f"{'revoked' if key['revokedAt'] else 'active'}  {key['label']}")


def _scopes(text: str) -> list[str]:
    scopes = [s.strip() for s in text.split(",") if s.strip()]
    if not scopes:
        raise argparse.ArgumentTypeError(f"name at least one of {', '.join(KEY_SCOPES)}")
    return scopes


