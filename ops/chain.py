"""``svc-ops allowlist ...`` and ``svc-ops chain ...``: operator commands for the chain.

They talk to the JSON-RPC chain of the settings. The in-process chain lives inside the
server process (its workers run there), so these commands refuse it, except ``allowlist
add|remove`` in dev, which records the decision in the ledger for the server's dev mirror
to carry onto its chain (``_set_allowed_dev``). Owner transactions
(the allowlist) need the owner key: read from ``--owner-key-file`` or typed at a prompt,
never taken from the command line (which ``ps`` shows) and never printed. They are operator
decisions like those of ``ops.runtime``: ``--operator`` (else ``$USER``) is checked before
anything is sent, and the transaction is recorded in ``operator_actions`` once mined.
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ops.chain_worker import run_worker
from ops.runtime import operator_name, operator_option
from payments.chain.models import ChainFinding
from payments.db import transaction, utcnow
from payments.models import AllowlistStatus, App
from payments.runtime import operator as decide
from router.settings import ENV_PREFIX, Settings

if TYPE_CHECKING:
    from payments.chain.batching import BatchPolicy
    from payments.chain.json_rpc import JsonRpcChain

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}\Z")


class OpsError(Exception):
    """A refusal the operator can act on; printed without a traceback."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    who = operator_option()
    allow = sub.add_parser("allowlist", help="the spender's recipient allowlist")
    allow_sub = allow.add_subparsers(dest="action", required=True)
    for action in ("add", "remove"):
        cmd = allow_sub.add_parser(action, parents=[who],
                                   help=f"{action} a recipient (owner transaction)")
        cmd.add_argument("address")
        cmd.add_argument("--owner-key-file", type=Path,
                         help="file holding the owner key (otherwise you are prompted)")
        cmd.add_argument("--max-fee-per-gas", type=_fee_cap, metavar="WEI|none",
                         help="this transaction's own fee cap, in place of "
                              "SVCSRV_CHAIN_MAX_FEE_PER_GAS (none: no cap)")
    allow_sub.add_parser("sync", help="read allowedRecipients(pay_to) for every app")
    chain = sub.add_parser("chain", help="relayer, settlement and reconciliation")
    chain_sub = chain.add_subparsers(dest="action", required=True)
    run = chain_sub.add_parser("run", help="run the relayer and settlement worker")
    run.add_argument("--once", action="store_true")
    chain_sub.add_parser("reconcile", help="compare ChargeSettled logs with the ledger")
    drift = chain_sub.add_parser("budget-drift", help="ledger remaining vs ERC-20 allowance")
    drift.add_argument("--record", action="store_true", help="also file operator findings")
    chain_sub.add_parser("findings", help="list open operator findings")
    chain_sub.add_parser("status", help="chain readiness")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.command == "allowlist" and args.action in ("add", "remove"):
        if settings.dev and settings.chain_backend == "in_process":
            return _set_allowed_dev(args, sessions)
        return _set_allowed(args, settings, sessions)
    if args.command == "chain" and args.action == "findings":
        # The ledger's rows: a monitoring host needs no node and no relayer key for them.
        _print_findings(sessions)
        return 0
    # web3 and eth-account take seconds to import: only the commands that talk to the
    # chain pay for them, not every `svc-ops` decision (bench/quickstart_bench.py).
    from payments.chain.allowlist import sync_allowlist
    from payments.chain.budget_drift import budget_drift
    from payments.chain.reconcile import Reconciler
    from payments.chain.workers import ChainCycle
    chain = connect(settings)
    if args.command == "allowlist":
        statuses = sync_allowlist(sessions, chain)
        for app_id, status in sorted(statuses.items()):
            print(f"{app_id}\t{status.value}")
    elif args.action == "run":
        cycle = ChainCycle.build(sessions, chain, worker_policy(settings))
        return run_worker(cycle, sessions, chain.relayer, settings.chain_worker_interval,
                          once=args.once)
    elif args.action == "reconcile":
        report = Reconciler(sessions, chain, log_blocks=settings.chain_log_blocks).run()
        print(json.dumps(asdict(report), indent=2))
    elif args.action == "budget-drift":
        for row in budget_drift(sessions, chain, utcnow(), record=args.record):
            print(f"{row.authorization_id}\t{row.owner}\tremaining={row.ledger_remaining}\t"
                  f"allowance={row.allowance}\tunsettled={row.unsettled}\tdrift={row.drift}")
    else:
        readiness = chain.readiness()
        print(json.dumps({"status": readiness.status, **readiness.detail}, indent=2))
    return 0


def _set_allowed(args: argparse.Namespace, settings: Settings,
                 sessions: sessionmaker[Session]) -> int:
    # The operator is checked first: a refusal after the transaction would leave an
    # on-chain change nobody recorded. The record follows the receipt, before the sync
    # (which reads the chain again and may fail on its own).
    from payments.chain.allowlist import set_allowed_recipient, sync_allowlist
    from payments.chain.gateway import FeeAboveCap
    who = operator_name(args)
    if args.max_fee_per_gas is not None:  # the operator's own cap for this transaction
        settings = replace(settings, chain_max_fee_per_gas=args.max_fee_per_gas or None)
    chain = connect(settings)
    key = _owner_key(args.owner_key_file)
    add = args.action == "add"
    try:
        receipt = set_allowed_recipient(chain, key, args.address, add)
    except FeeAboveCap as exc:
        # The relayer's cap guards automatic spending; an operator at the keyboard may
        # decide otherwise for this one transaction (removing a recipient can be urgent).
        raise OpsError(f"{exc}; nothing was sent. To send it anyway, give this transaction "
                       "its own cap: --max-fee-per-gas WEI (or none)") from None
    with transaction(sessions) as session:
        decide.record_allowlist(session, who, utcnow(), address=args.address, add=add,
                                tx_hash=receipt.tx_hash)
    statuses = sync_allowlist(sessions, chain, pay_to=args.address)
    print(f"{args.action} {args.address}: tx {receipt.tx_hash} in block "
          f"{receipt.block_number}; {len(statuses)} app(s) updated; recorded for {who}")
    return 0


def _set_allowed_dev(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    """Dev only: the in-process chain lives inside ``svc-server dev`` and starts empty each
    run, mirroring what the ledger calls allowed (``mirror_to_dev_chain``, every cycle). So
    the decision is written to the ledger, for the apps paying ``address``, and the server
    sends the owner transaction on its next cycle. No owner key is involved: the dev chain's
    owner is the server's own test account."""
    who = operator_name(args)
    if not _ADDRESS.match(args.address):
        raise OpsError(f"{args.address!r} is not a 0x address")
    add = args.action == "add"
    status = AllowlistStatus.ALLOWED if add else AllowlistStatus.NOT_ALLOWED
    with transaction(sessions) as session:
        apps = session.scalars(select(App).where(App.pay_to.is_not(None))
                               .with_for_update()).all()
        paying = [a for a in apps if (a.pay_to or "").lower() == args.address.lower()]
        for app in paying:
            app.recipient_allowlist_status = status
        decide.record_allowlist(session, who, utcnow(), address=args.address, add=add)
    print(f"{args.action} {args.address}: dev chain, recorded in the ledger for {who}; "
          f"{len(paying)} app(s) updated; the running svc-server dev applies it within a "
          "cycle" + ("" if add else " (its chain forgets it at the next start)"))
    return 0


def connect(settings: Settings) -> JsonRpcChain:
    from payments.chain.json_rpc import JsonRpcChain
    from router.chain_params import chain_params
    if settings.chain_backend != "json_rpc":
        raise OpsError("the in-process chain lives inside the server and allowlists app "
                       "recipients at start; set SVCSRV_CHAIN_BACKEND=json_rpc to use these "
                       "commands")
    if not settings.relayer_key:
        raise OpsError(f"set {ENV_PREFIX}RELAYER_KEY (the relayer's private key)")
    assert settings.chain_rpc_url and settings.spender_address
    # The servers' own params: the settlement's events say the network the delivery's said.
    return JsonRpcChain.connect(settings.chain_rpc_url, chain_params(settings),
                                settings.relayer_key,
                                confirmations=settings.chain_confirmations,
                                max_fee_per_gas=settings.chain_max_fee_per_gas)


def worker_policy(settings: Settings) -> BatchPolicy:
    from payments.chain.batching import BatchPolicy
    return BatchPolicy(max_charges=settings.settlement_batch_size,
                       max_age=settings.settlement_batch_age, log_blocks=settings.chain_log_blocks)


def _fee_cap(text: str) -> int:
    """``--max-fee-per-gas``: wei, or ``none`` (0 here: no cap)."""
    if text.strip().lower() == "none":
        return 0
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of wei or none") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a fee cap is at least 1 wei (none: no cap)")
    return value


def _owner_key(path: Path | None) -> str:
    key = path.read_text(encoding="utf-8").strip() if path else getpass.getpass("owner key: ")
    if not key:
        raise OpsError("no owner key given")
    return key


def _print_findings(sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        for row in session.scalars(select(ChainFinding).where(
                ChainFinding.resolved_at.is_(None)).order_by(ChainFinding.id)):
            print(f"{row.id}\t{row.created_at.isoformat()}\t{row.kind.value}\t"
                  f"charge={row.charge_seq}\ttx={row.tx_hash}\t{json.dumps(row.detail)}")
