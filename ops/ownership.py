"""``svc-ops contract transfer-ownership|accept-ownership``: handing the spender to another
owner in two steps (payments/chain/ownership.py).

``transfer-ownership --to NEW`` names the pending owner (the current owner's key);
``accept-ownership`` is the new owner's own transaction (its key, checked to be
``pendingOwner()`` before anything is signed); ``transfer-ownership --cancel`` clears the
pending owner. Each is an owner transaction as ``relayer add`` is (ops/owner_tx.py: the
operator checked first, the key from a file or a prompt, the fee cap) and is recorded in
``operator_actions`` once mined. A spender deployed as plain ``Ownable`` has no pending
owner: these refuse it (exit 2), and only ``--one-step --yes`` hands it over, at once and
for good, as the command did before the contract became ``Ownable2Step``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from functools import partial
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from ops.chain import reader
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
from payments.runtime.models import OperatorActionKind
from router.settings import Settings

if TYPE_CHECKING:
    from payments.chain.ownership import Ownership
    from payments.chain.reader import ChainReader

log = logging.getLogger(__name__)


def add_parsers(contract_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    transfer = contract_sub.add_parser(
        "transfer-ownership", parents=[operator_option(), owner_options()],
        help="start handing the spender to another owner (e.g. a multisig), who then "
             "accepts; or --cancel a pending handover (owner transaction)",
        epilog="BudgetSpenderV2 is Ownable2Step: --to names the pending owner, and the owner "
               "changes only when that account accepts (accept-ownership); until then the "
               "current owner keeps control and may name another or --cancel. A spender "
               "deployed as plain Ownable (no pendingOwner()) is refused (exit 2) unless "
               "--one-step: the new owner is then the owner at once, irreversibly, and "
               "without --yes the command only says what it would do (exit 2).")
    # Not required=True: argparse would say "one of the arguments --to NEW_OWNER --cancel is
    # required", which reads as one option; _require_target says what to give.
    target = transfer.add_mutually_exclusive_group()
    target.add_argument("--to", metavar="ADDRESS", help="the new owner's address")
    target.add_argument("new_owner", nargs="?", metavar="NEW_OWNER",
                        help="the same as --to ADDRESS")
    target.add_argument("--cancel", action="store_true",
                        help="clear the pending owner (transferOwnership(0)): it can no "
                             "longer accept")
    transfer.add_argument("--one-step", action="store_true",
                          help="only for a spender deployed as plain Ownable: make the new "
                               "owner the owner at once, irreversibly (needs --yes)")
    transfer.add_argument("--yes", action="store_true",
                          help="with --one-step: send it (without: print what it would do, "
                               "send nothing); not needed otherwise")
    transfer.set_defaults(check_usage=partial(_require_target, transfer))
    contract_sub.add_parser(
        "accept-ownership", parents=[operator_option(), owner_options("new owner")],
        help="accept the pending handover: the new owner's transaction, signed by its key "
             "(checked to be pendingOwner() first)")


def _require_target(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A usage error (exit 2, before any setting is read) unless the command names the new
    owner or cancels: ops/cli.py calls it once the arguments are parsed."""
    if args.to is None and args.new_owner is None and not args.cancel:
        parser.error("say whom to hand the spender to: --to ADDRESS (or the address alone), "
                     "or --cancel to clear the pending owner")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    # As `relayer add`: the operator and the address before the node is asked, then the
    # contract's kind and what the transaction would do, said before the key is asked for.
    who = operator_name(args)
    new = None
    if args.action == "transfer-ownership" and not args.cancel:
        new = checked_address(args.to or args.new_owner, "new owner")
    chain = reader(with_fee_cap(settings, args.max_fee_per_gas))
    ownership = _ownership(chain, args)
    if args.action == "accept-ownership":
        return _accept(args, who, chain, ownership, sessions)
    if new is None:
        return _cancel(args, who, chain, ownership, sessions)
    return _transfer(args, who, chain, ownership, new, sessions)


def _ownership(chain: ChainReader, args: argparse.Namespace) -> Ownership:
    from payments.chain.ownership import read_ownership

    ownership = read_ownership(chain)
    one_step = getattr(args, "one_step", False)
    spender = chain.spender.address
    if ownership.two_step and one_step:
        raise OpsError(f"the spender {spender} is Ownable2Step: --one-step is only for one "
                       "deployed as plain Ownable; without it the new owner accepts before "
                       "anything changes hands. Nothing was sent")
    if not ownership.two_step and not one_step:
        what = ("accept" if args.action == "accept-ownership" else
                "cancel" if args.cancel else "start a handover to")
        raise OpsError(
            f"the spender {spender} was deployed as plain Ownable (it has no "
            f"pendingOwner()), so there is no two-step handover to {what}: its "
            "transferOwnership makes the new owner the owner at once, with nothing to "
            "accept and no way back. To do that anyway: svc-ops contract transfer-ownership "
            "--to ADDRESS --one-step (it says what it would do; --yes sends it). Nothing "
            "was sent")
    return ownership


def _transfer(args: argparse.Namespace, who: str, chain: ChainReader, ownership: Ownership,
              new: str, sessions: sessionmaker[Session]) -> int:
    from payments.chain.ownership import plan_transfer, transfer_ownership
    plan = plan_transfer(chain, ownership, new)
    if (refusal := plan.refusal()) is not None:
        raise OpsError(f"{refusal}; nothing was sent")
    print("\n".join(plan.description()), flush=True)
    if (warning := plan.warning()) is not None:
        print(f"svc-ops: warning: {warning}", file=sys.stderr, flush=True)
    if not plan.two_step and not args.yes:
        raise OpsError("nothing was sent: the transfer is irreversible; read the above and "
                       "run the command again with --yes to send it")
    key = owner_key(args.owner_key_file)
    signer = require_owner(chain, key)
    log.info("transferOwnership of %s to %s, signed by the owner %s", plan.spender, new, signer)
    with within_fee_cap():
        receipt = transfer_ownership(chain, key, new)
    mined = f"tx {receipt.tx_hash} in block {receipt.block_number}"
    with transaction(sessions) as session:
        if plan.two_step:
            decide.record_ownership_step(
                session, who, utcnow(), OperatorActionKind.CONTRACT_OWNERSHIP_OFFERED,
                spender=plan.spender, tx_hash=receipt.tx_hash, chain_id=plan.chain_id,
                owner=signer, pendingOwner=new, replacedPendingOwner=plan.pending)
        else:
            decide.record_ownership_transfer(session, who, utcnow(), spender=plan.spender,
                                             previous=signer, new=new, tx_hash=receipt.tx_hash,
                                             chain_id=plan.chain_id)
    if not plan.two_step:
        print(f"ownership transferred to {new}: {mined}; the spender's owner() is now "
              f"{chain.owner()}; recorded for {who}")
        return 0
    print(f"handover to {new} started: {mined}; the spender's pendingOwner() is now "
          f"{chain.pending_owner()} and its owner() is still {chain.owner()}; recorded for "
          f"{who}")
    print(f"{new} becomes the owner when it accepts: svc-ops contract accept-ownership "
          "with its key (a multisig sends acceptOwnership() itself). Until then the owner "
          "keeps control; svc-ops contract transfer-ownership --cancel withdraws the offer.")
    return 0


def _cancel(args: argparse.Namespace, who: str, chain: ChainReader, ownership: Ownership,
            sessions: sessionmaker[Session]) -> int:
    from payments.chain.ownership import cancel_transfer
    spender = chain.spender.address
    if args.one_step:
        raise OpsError("--cancel and --one-step do not go together: a one-step transfer "
                       "leaves nothing pending to cancel; nothing was sent")
    if (pending := ownership.pending) is None:
        raise OpsError(f"no handover of the spender {spender} is pending (pendingOwner() is "
                       "the zero address): there is nothing to cancel; nothing was sent")
    print(f"cancel the pending handover of BudgetSpenderV2 {spender} on chain "
          f"{chain.params.chain_id} to {pending}: transferOwnership(0x0); {ownership.owner} "
          "stays the owner", flush=True)
    key = owner_key(args.owner_key_file)
    signer = require_owner(chain, key)
    log.info("transferOwnership(0) of %s (cancels %s), signed by the owner %s", spender,
             pending, signer)
    with within_fee_cap():
        receipt = cancel_transfer(chain, key)
    with transaction(sessions) as session:
        decide.record_ownership_step(
            session, who, utcnow(), OperatorActionKind.CONTRACT_OWNERSHIP_CANCELLED,
            spender=spender, tx_hash=receipt.tx_hash, chain_id=chain.params.chain_id,
            owner=signer, cancelledPendingOwner=pending)
    print(f"handover to {pending} cancelled: tx {receipt.tx_hash} in block "
          f"{receipt.block_number}; the spender has no pending owner and its owner() is "
          f"{chain.owner()}; recorded for {who}")
    return 0


def _accept(args: argparse.Namespace, who: str, chain: ChainReader, ownership: Ownership,
            sessions: sessionmaker[Session]) -> int:
    from eth_account import Account

    from payments.chain.ownership import accept_ownership
    spender = chain.spender.address
    if (pending := ownership.pending) is None:
        raise OpsError(f"no handover of the spender {spender} is pending (pendingOwner() is "
                       f"the zero address): its owner {ownership.owner} starts one with "
                       "svc-ops contract transfer-ownership --to ADDRESS; nothing was sent")
    print(f"accept the ownership of BudgetSpenderV2 {spender} on chain "
          f"{chain.params.chain_id}: from {ownership.owner} (the owner now) to {pending} "
          "(the pending owner)", flush=True)
    # The contract would refuse any other key (OwnableUnauthorizedAccount) after a round
    # trip; here nothing is signed first, and the refusal names both addresses.
    key = owner_key(args.owner_key_file, "new owner")
    signer = str(Account.from_key(key).address)
    if signer != pending:
        raise OpsError(f"the key given is {signer}'s, and the spender's pending owner is "
                       f"{pending}: only the pending owner's key can accept; nothing was sent")
    if chain.gas_balance(signer) == 0:
        raise OpsError(f"{signer} holds no gas money on chain {chain.params.chain_id}: send "
                       "it some ETH first; nothing was sent")
    log.info("acceptOwnership of %s, signed by the pending owner %s", spender, signer)
    with within_fee_cap():
        receipt = accept_ownership(chain, key)
    with transaction(sessions) as session:
        decide.record_ownership_step(
            session, who, utcnow(), OperatorActionKind.CONTRACT_OWNERSHIP_ACCEPTED,
            spender=spender, tx_hash=receipt.tx_hash, chain_id=chain.params.chain_id,
            previousOwner=ownership.owner, newOwner=signer)
    print(f"ownership accepted: tx {receipt.tx_hash} in block {receipt.block_number}; the "
          f"spender's owner() is now {chain.owner()} (was {ownership.owner}); recorded for "
          f"{who}. Its key is now the --owner-key-file of the owner commands.")
    return 0
