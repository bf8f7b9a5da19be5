"""``svc-ops contract deploy|transfer-ownership``: BudgetSpenderV2 on the node of the
settings, and handing it to another owner.

What ``deploy`` needs of the settings: ``SVCSRV_CHAIN_BACKEND=json_rpc``, the node
(``SVCSRV_CHAIN_RPC_URL``, or ``_FILE``), ``SVCSRV_CHAIN_ID`` and the token
(``SVCSRV_USDC_ADDRESS``); not ``SVCSRV_SPENDER_ADDRESS``, which is what it prints. The
owner key (ops/owner_tx.py: a file or a prompt) deploys and becomes the contract's owner;
it is never a setting, so it is never in the block of variables every process shares. The
deploy is recorded in ``operator_actions`` like every owner transaction.

``transfer-ownership`` (the chain settings with the spender) is the owner transaction
``transferOwnership`` (ops/owner_tx.py, as ``relayer add``), irreversible with the
contract's one-step ``Ownable`` (payments/chain/ownership.py): it says what it would do,
and sends only with ``--yes``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from sqlalchemy.orm import Session, sessionmaker

from ops.chain import key_address, reader, require_node
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
from payments.db import transaction, utcnow
from payments.runtime import operator as decide
from router.settings import ENV_PREFIX, Settings

log = logging.getLogger(__name__)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    contract = sub.add_parser("contract", help="the BudgetSpenderV2 contract")
    contract_sub = contract.add_subparsers(dest="action", required=True)
    contract_sub.add_parser(
        "deploy", parents=[operator_option(), owner_options()],
        help="deploy BudgetSpenderV2 for SVCSRV_USDC_ADDRESS, owned by the owner key; "
             "prints SVCSRV_SPENDER_ADDRESS")
    transfer = contract_sub.add_parser(
        "transfer-ownership", parents=[operator_option(), owner_options()],
        help="make NEW_OWNER (e.g. a multisig) the spender's owner: irreversible, sent only "
             "with --yes (owner transaction)",
        epilog="BudgetSpenderV2 is Ownable, not Ownable2Step: NEW_OWNER is the owner as soon "
               "as the transaction is mined, accepts nothing, and only it can transfer the "
               "contract again. Without --yes the command says what it would do and sends "
               "nothing (exit 2).")
    transfer.add_argument("new_owner", metavar="NEW_OWNER", help="the new owner's address")
    transfer.add_argument("--yes", action="store_true",
                          help="send it (without: print what it would do, send nothing)")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.action == "transfer-ownership":
        return _transfer(args, settings, sessions)
    return _deploy(args, settings, sessions)


def _deploy(args: argparse.Namespace, settings: Settings,
            sessions: sessionmaker[Session]) -> int:
    from payments.chain.deploy import deploy_spender
    from payments.chain.json_rpc import node
    who = operator_name(args)
    settings = with_fee_cap(settings, args.max_fee_per_gas)
    rpc_url = require_node(settings, spender=False)
    key = owner_key(args.owner_key_file)
    log.info("deploying BudgetSpenderV2 on chain %d for the token %s, owned by %s",
             settings.chain_id, settings.usdc_address, key_address(key))
    with within_fee_cap():
        deployed = deploy_spender(node(rpc_url), key, settings.usdc_address,
                                  chain_id=settings.chain_id,
                                  confirmations=settings.chain_confirmations,
                                  max_fee_per_gas=settings.chain_max_fee_per_gas)
    with transaction(sessions) as session:
        decide.record_deploy(session, who, utcnow(), address=deployed.address,
                             tx_hash=deployed.tx_hash, chain_id=deployed.chain_id,
                             token=deployed.token, owner=deployed.owner)
    print(f"BudgetSpenderV2 deployed at {deployed.address}: tx {deployed.tx_hash} in block "
          f"{deployed.block_number}, chain {deployed.chain_id}, token {deployed.token}, "
          f"owner {deployed.owner}; recorded for {who}")
    print("Set it in the settings of every process (servers, chain workers, svc-ops):")
    print(f"{ENV_PREFIX}SPENDER_ADDRESS={deployed.address}")
    print("Then make the chain worker's key a relayer (`svc-ops relayer add <address>`) and "
          "send it gas money; allowlist each app's pay_to (`svc-ops allowlist add`).")
    return 0


def _transfer(args: argparse.Namespace, settings: Settings,
              sessions: sessionmaker[Session]) -> int:
    # As `relayer add`: the operator and the address before the node is asked, then what
    # the transfer would do, said before the key is asked for; the key checked to be the
    # owner before anything is signed, the record once mined.
    from payments.chain.ownership import plan_transfer, transfer_ownership
    who = operator_name(args)
    new = checked_address(args.new_owner, "new owner")
    chain = reader(with_fee_cap(settings, args.max_fee_per_gas))
    plan = plan_transfer(chain, new)
    if (refusal := plan.refusal()) is not None:
        raise OpsError(f"{refusal}; nothing was sent")
    print("\n".join(plan.description()), flush=True)
    if (warning := plan.warning()) is not None:
        print(f"svc-ops: warning: {warning}", file=sys.stderr, flush=True)
    if not args.yes:
        raise OpsError("nothing was sent: the transfer is irreversible; read the above and "
                       "run the command again with --yes to send it")
    key = owner_key(args.owner_key_file)
    signer = require_owner(chain, key)
    log.info("transferOwnership of %s to %s, signed by the owner %s", plan.spender, new, signer)
    with within_fee_cap():
        receipt = transfer_ownership(chain, key, new)
    with transaction(sessions) as session:
        decide.record_ownership_transfer(session, who, utcnow(), spender=plan.spender,
                                         previous=signer, new=new, tx_hash=receipt.tx_hash,
                                         chain_id=plan.chain_id)
    print(f"ownership transferred to {new}: tx {receipt.tx_hash} in block "
          f"{receipt.block_number}; the spender's owner() is now {chain.owner()}; recorded "
          f"for {who}")
    return 0
