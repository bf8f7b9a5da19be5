"""``svc-ops relayer add|remove|list|status``: the spender's relayers.

``add`` and ``remove`` are the ``setRelayer`` owner transaction, handled as the allowlist's
are (ops/owner_tx.py: the owner key from a file or a prompt, checked to be the owner before
anything is signed; the operator checked before anything is sent; the mined transaction
recorded in ``operator_actions``). ``status`` and ``list`` only read, with no key: whether
an address is a relayer and the gas money it holds. The contract keeps no list of its
relayers, so ``list`` reads the addresses this service knows of: those its operators added
or removed (``operator_actions``), those whose chain worker wrote a heartbeat, and the
relayer key of these settings.
"""

from __future__ import annotations

import argparse
import logging
import sys

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ops.chain import key_address, reader
from ops.exits import Exit, status_exits
from ops.owner_tx import (
    checked_address,
    owner_key,
    owner_options,
    require_owner,
    with_fee_cap,
    within_fee_cap,
)
from ops.runtime import operator_name, operator_option
from payments.chain.heartbeat import heartbeats
from payments.db import transaction, utcnow
from payments.runtime import operator as decide
from payments.runtime.models import OperatorAction, OperatorActionKind
from router.settings import Settings

log = logging.getLogger(__name__)
_DECISIONS = (OperatorActionKind.RELAYER_ADD, OperatorActionKind.RELAYER_REMOVE)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    who = operator_option()
    relayer = sub.add_parser("relayer", help="the spender's relayers (keys that relay "
                                             "permits and settle charges)")
    relayer_sub = relayer.add_subparsers(dest="action", required=True)
    for action in ("add", "remove"):
        cmd = relayer_sub.add_parser(action, parents=[who, owner_options()],
                                     help=f"{action} a relayer (owner transaction)")
        cmd.add_argument("address")
    relayer_sub.add_parser("list", help="the relayers this service knows of, as the chain "
                                        "has them (no key needed)")
    status = relayer_sub.add_parser(
        "status", help="is ADDRESS a relayer, and its gas money (no key needed)",
        epilog=status_exits("ADDRESS cannot send: not a relayer, or a relayer without gas "
                            "money"))
    status.add_argument("address")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.action in ("add", "remove"):
        return _set(args, settings, sessions)
    from payments.chain.relayers import standing
    if args.action == "status":
        address = checked_address(args.address, "relayer")
        found = standing(reader(settings), address)
        print(found.line())
        return Exit.OK if found.can_send else Exit.DEGRADED
    # `list` shows retired relayers too, by design: it exits 0 whatever they are.
    addresses = known_relayers(sessions, settings)
    if not addresses:
        print("no relayer known here (the contract keeps no list); `svc-ops relayer "
              "status <address>` reads any address")
    chain = reader(settings)
    for address in addresses:
        print(standing(chain, address).line())
    return Exit.OK


def _set(args: argparse.Namespace, settings: Settings,
         sessions: sessionmaker[Session]) -> int:
    # As `allowlist add|remove`: the operator and the address before the node is asked, the
    # key before anything is signed, the record once mined.
    from payments.chain.relayers import set_relayer, standing
    who = operator_name(args)
    address = checked_address(args.address, "relayer")
    chain = reader(with_fee_cap(settings, args.max_fee_per_gas))
    key = owner_key(args.owner_key_file)
    add = args.action == "add"
    signer = require_owner(chain, key)
    log.info("relayer %s %s: setRelayer signed by the owner %s", args.action, address, signer)
    with within_fee_cap():
        receipt = set_relayer(chain, key, address, add)
    with transaction(sessions) as session:
        decide.record_relayer(session, who, utcnow(), address=address, add=add,
                              tx_hash=receipt.tx_hash)
    print(f"{args.action} {address}: tx {receipt.tx_hash} in block {receipt.block_number}; "
          f"recorded for {who}")
    now = standing(chain, address)
    if add and now.balance_wei == 0:
        print(f"svc-ops: {address} has no gas money: send it some before a chain worker "
              "signs with its key", file=sys.stderr)
    return 0


def known_relayers(sessions: sessionmaker[Session], settings: Settings) -> list[str]:
    """Checksummed, in order: the relayer key's, heartbeats' (newest first), then those of
    operator decisions (newest first); each once."""
    from eth_utils.address import to_checksum_address
    found = [key_address(settings.relayer_key)] if settings.relayer_key else []
    with sessions() as session:
        found += [beat.relayer for beat in heartbeats(session) if beat.relayer]
        found += session.scalars(select(OperatorAction.subject)
                                 .where(OperatorAction.action.in_(_DECISIONS))
                                 .order_by(OperatorAction.id.desc())).all()
    seen: dict[str, str] = {}
    for address in found:
        seen.setdefault(address.lower(), str(to_checksum_address(address)))
    return list(seen.values())
