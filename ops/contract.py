"""``svc-ops contract deploy|transfer-ownership|accept-ownership``: BudgetSpenderV2 on the
node of the settings, and handing it to another owner.

What ``deploy`` needs of the settings: ``SVCSRV_CHAIN_BACKEND=json_rpc``, the node
(``SVCSRV_CHAIN_RPC_URL``, or ``_FILE``), ``SVCSRV_CHAIN_ID`` and the token
(``SVCSRV_USDC_ADDRESS``); not ``SVCSRV_SPENDER_ADDRESS``, which is what it prints. The
owner key (ops/owner_tx.py: a file or a prompt) deploys and becomes the contract's owner;
it is never a setting, so it is never in the block of variables every process shares. The
deploy is recorded in ``operator_actions`` like every owner transaction.

``transfer-ownership`` and ``accept-ownership`` (the chain settings with the spender) hand
the contract over in two steps, the new owner accepting (ops/ownership.py).
"""

from __future__ import annotations

import argparse
import logging

from sqlalchemy.orm import Session, sessionmaker

from ops import ownership
from ops.chain import key_address, require_node
from ops.owner_tx import owner_key, owner_options, with_fee_cap, within_fee_cap
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
    ownership.add_parsers(contract_sub)


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.action in ("transfer-ownership", "accept-ownership"):
        return ownership.run(args, settings, sessions)
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
