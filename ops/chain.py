"""``svc-ops allowlist ...`` and ``svc-ops chain ...``: operator commands for the chain.

They talk to the JSON-RPC chain of the settings. The in-process chain lives inside the
server process (its workers run there), so these commands refuse it, except ``allowlist
add|remove`` in dev, which records the decision in the ledger for the server's dev mirror
to carry onto its chain (``_set_allowed_dev``). Only ``chain run``, ``reconcile`` and
``budget-drift`` need the relayer key (:func:`connect`): the rest read, or send owner
transactions, through a :func:`reader`, so a monitoring host or the owner's machine runs
them without the hot key. Owner transactions (the allowlist; the relayers, ops/relayers.py)
take the owner key as ops/owner_tx.py says. They are operator decisions like those of
``ops.runtime``: ``--operator`` (else ``$USER``) is checked before anything is sent, and the
transaction is recorded in ``operator_actions`` once mined.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ops.chain_worker import run_worker
from ops.exits import readiness_exit, status_exits
from ops.owner_tx import (
    OpsError,
    checked_address,
    owner_key,
    owner_options,
    require_owner,
    with_fee_cap,
    within_fee_cap,
)
from ops.runtime import operator_name, operator_option
from payments.chain.models import ChainFinding
from payments.db import transaction, utcnow
from payments.models import AllowlistStatus, App
from payments.runtime import operator as decide
from router.settings import ENV_PREFIX, Settings

if TYPE_CHECKING:
    from payments.chain.batching import BatchPolicy
    from payments.chain.json_rpc import JsonRpcChain
    from payments.chain.reader import ChainReader

__all__ = ["OpsError", "add_parsers", "connect", "key_address", "reader", "require_node", "run"]

log = logging.getLogger(__name__)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    who = operator_option()
    allow = sub.add_parser("allowlist", help="the spender's recipient allowlist")
    allow_sub = allow.add_subparsers(dest="action", required=True)
    for action in ("add", "remove"):
        cmd = allow_sub.add_parser(action, parents=[who, owner_options()],
                                   help=f"{action} a recipient (owner transaction)")
        cmd.add_argument("address")
    allow_sub.add_parser("sync", help="read allowedRecipients(pay_to) for every app")
    chain = sub.add_parser("chain", help="relayer, settlement and reconciliation")
    chain_sub = chain.add_subparsers(dest="action", required=True)
    run = chain_sub.add_parser("run", help="run the relayer and settlement worker")
    run.add_argument("--once", action="store_true")
    chain_sub.add_parser("reconcile", help="compare ChargeSettled logs with the ledger")
    drift = chain_sub.add_parser("budget-drift", help="ledger remaining vs ERC-20 allowance")
    drift.add_argument("--record", action="store_true", help="also file operator findings")
    chain_sub.add_parser("findings", help="list open operator findings")
    status = chain_sub.add_parser(
        "status", help="chain readiness, and the spender's owner and pending owner (no "
                       "relayer key needed)",
        epilog=status_exits("a check fails (the chain id, the spender's code or token; with "
                            "a relayer: a relayer of the spender, its gas money, the fee "
                            "cap), listed in problems"))
    status.add_argument("--relayer", metavar="ADDRESS",
                        help="also check this relayer: a relayer of the spender, its gas "
                             "money (default: the address of SVCSRV_RELAYER_KEY, when set)")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.command == "allowlist" and args.action in ("add", "remove"):
        if settings.dev and settings.chain_backend == "in_process":
            return _set_allowed_dev(args, sessions)
        return _set_allowed(args, settings, sessions)
    if args.command == "chain" and args.action == "findings":
        # The ledger's rows: a monitoring host needs no node and no relayer key for them.
        _print_findings(sessions)
        return 0
    if args.command == "chain" and args.action == "status":
        return _status(args, settings)
    # web3 and eth-account take seconds to import: only the commands that talk to the
    # chain pay for them, not every `svc-ops` decision (bench/quickstart_bench.py).
    from payments.chain.allowlist import sync_allowlist
    from payments.chain.budget_drift import budget_drift
    from payments.chain.reconcile import Reconciler
    from payments.chain.workers import ChainCycle
    if args.command == "allowlist":
        statuses = sync_allowlist(sessions, reader(settings))
        for app_id, status in sorted(statuses.items()):
            print(f"{app_id}\t{status.value}")
        return 0
    chain = connect(settings)
    if args.action == "run":
        cycle = ChainCycle.build(sessions, chain, worker_policy(settings))
        return run_worker(cycle, sessions, chain.relayer, settings.chain_worker_interval,
                          once=args.once)
    if args.action == "reconcile":
        report = Reconciler(sessions, chain, log_blocks=settings.chain_log_blocks).run()
        print(json.dumps(asdict(report), indent=2))
    else:  # budget-drift
        for row in budget_drift(sessions, chain, utcnow(), record=args.record):
            print(f"{row.authorization_id}\t{row.owner}\tremaining={row.ledger_remaining}\t"
                  f"allowance={row.allowance}\tunsettled={row.unsettled}\tdrift={row.drift}")
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    """The servers' reads (node, chain id, the spender's code and token), and the relayer's
    standing when there is an address to check: ``--relayer``, else the relayer key's
    (the same checks as a server's ``/statusz`` with that key; docs/chain.md). It exits
    with what it found (ops/exits.py), so a monitor need not read the JSON; the relayer key
    missing is not a failure: the checks need none."""
    chain = reader(settings)
    relayer, named = None, None
    if args.relayer:
        relayer = checked_address(args.relayer, "relayer")
    elif settings.relayer_key:
        relayer, named = key_address(settings.relayer_key), "the relayer key"
    readiness = chain.readiness_of(relayer, named=named)
    key = "configured" if settings.relayer_key else "not_configured"
    print(json.dumps({"status": readiness.status, "relayerKey": key, **readiness.detail,
                      **_ownership(chain, readiness.detail)}, indent=2))
    return readiness_exit(readiness)


def _ownership(chain: ChainReader, detail: Mapping[str, Any]) -> dict[str, str | None]:
    """The spender's owner and pending owner (an ownership handover under way), for the
    operators' eyes only: not a check, so not in the servers' ``/statusz``. Nothing when
    there is no contract to read, or the node stopped answering."""
    from payments.chain.gateway import ChainError
    from payments.chain.ownership import read_ownership

    if "chainId" not in detail or "no contract at the spender address" in detail.get(
            "problems", ()):
        return {}
    try:
        return read_ownership(chain).as_json()
    except ChainError:
        return {}


def _set_allowed(args: argparse.Namespace, settings: Settings,
                 sessions: sessionmaker[Session]) -> int:
    # The operator is checked first: a refusal after the transaction would leave an
    # on-chain change nobody recorded. The record follows the receipt, before the sync
    # (which reads the chain again and may fail on its own).
    from payments.chain.allowed_recipients import set_allowed_recipient
    from payments.chain.allowlist import sync_allowlist
    who = operator_name(args)
    address = checked_address(args.address, "recipient")
    chain = reader(with_fee_cap(settings, args.max_fee_per_gas))
    key = owner_key(args.owner_key_file)
    add = args.action == "add"
    signer = require_owner(chain, key)
    log.info("allowlist %s %s: setAllowedRecipient signed by the owner %s", args.action,
             address, signer)
    with within_fee_cap():
        receipt = set_allowed_recipient(chain, key, address, add)
    with transaction(sessions) as session:
        decide.record_allowlist(session, who, utcnow(), address=address, add=add,
                                tx_hash=receipt.tx_hash)
    statuses = sync_allowlist(sessions, chain, pay_to=address)
    print(f"{args.action} {address}: tx {receipt.tx_hash} in block "
          f"{receipt.block_number}; {len(statuses)} app(s) updated; recorded for {who}")
    return 0


def _set_allowed_dev(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    """Dev only: the in-process chain lives inside ``svc-server dev`` (kept between runs in
    ``var/chain-state``) and mirrors the ledger's allowlist decisions
    (``mirror_to_dev_chain``: at start and every cycle, adding and removing). So the
    decision is written to the ledger, for the apps paying ``address``, and the server
    sends the owner transaction on its next cycle. No owner key is involved: the dev chain's
    owner is the server's own test account."""
    who = operator_name(args)
    address = checked_address(args.address, "recipient")
    add = args.action == "add"
    status = AllowlistStatus.ALLOWED if add else AllowlistStatus.NOT_ALLOWED
    with transaction(sessions) as session:
        apps = session.scalars(select(App).where(App.pay_to.is_not(None))
                               .with_for_update()).all()
        paying = [a for a in apps if (a.pay_to or "").lower() == address.lower()]
        for app in paying:
            app.recipient_allowlist_status = status
        decide.record_allowlist(session, who, utcnow(), address=address, add=add)
    print(f"{args.action} {address}: dev chain, recorded in the ledger for {who}; "
          f"{len(paying)} app(s) updated; the running svc-server dev applies it within a "
          "cycle (a stopped one, at its next start)")
    return 0


def connect(settings: Settings) -> JsonRpcChain:
    """The chain with the relayer key, for what signs with it (``chain run``) or is built
    on the relayer's gateway (``reconcile``, ``budget-drift``)."""
    from payments.chain.json_rpc import JsonRpcChain
    from router.chain_params import chain_params
    rpc_url = require_node(settings)
    if not settings.relayer_key:
        raise OpsError(f"set {ENV_PREFIX}RELAYER_KEY (the relayer's private key)")
    # The servers' own params: the settlement's events say the network the delivery's said.
    return JsonRpcChain.connect(rpc_url, chain_params(settings), settings.relayer_key,
                                confirmations=settings.chain_confirmations,
                                max_fee_per_gas=settings.chain_max_fee_per_gas)


def reader(settings: Settings) -> ChainReader:
    """The chain without any key: reads, and owner transactions signed with the key the
    operator hands in."""
    from payments.chain.json_rpc import read_only
    from router.chain_params import chain_params
    rpc_url = require_node(settings)
    return read_only(rpc_url, chain_params(settings), confirmations=settings.chain_confirmations,
                     max_fee_per_gas=settings.chain_max_fee_per_gas)


def require_node(settings: Settings, *, spender: bool = True) -> str:
    """The node's URL, once the settings name a JSON-RPC chain (and its spender, unless
    ``spender`` is False: ``contract deploy`` makes one)."""
    if settings.chain_backend != "json_rpc":
        raise OpsError("the in-process chain lives inside the server, which deploys its "
                       "contracts and sets its relayer and allowlist at each start; set "
                       f"{ENV_PREFIX}CHAIN_BACKEND=json_rpc to use these commands")
    if spender and not settings.spender_address:
        raise OpsError(f"set {ENV_PREFIX}SPENDER_ADDRESS (the BudgetSpenderV2 address; "
                       "`svc-ops contract deploy` deploys one)")
    assert settings.chain_rpc_url is not None  # Settings requires it for json_rpc
    return settings.chain_rpc_url


def key_address(key: str) -> str:
    """The address of a private key (never the key itself)."""
    from eth_account import Account
    return str(Account.from_key(key).address)


def worker_policy(settings: Settings) -> BatchPolicy:
    from payments.chain.batching import BatchPolicy
    return BatchPolicy(max_charges=settings.settlement_batch_size,
                       max_age=settings.settlement_batch_age, log_blocks=settings.chain_log_blocks)


def _print_findings(sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        for row in session.scalars(select(ChainFinding).where(
                ChainFinding.resolved_at.is_(None)).order_by(ChainFinding.id)):
            print(f"{row.id}\t{row.created_at.isoformat()}\t{row.kind.value}\t"
                  f"charge={row.charge_seq}\ttx={row.tx_hash}\t{json.dumps(row.detail)}")
