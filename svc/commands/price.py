"""``svc price <usd>`` and ``svc price --atomic <n>``: USDC amounts both ways, exactly."""

from __future__ import annotations

import argparse

from svc.amounts import AmountError, atomic_to_usd, parse_atomic, usd_to_atomic
from svc.errors import ExitCode, usage
from svc.output import Output


def register(groups: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    price = groups.add_parser("price", parents=[common],
                              help="convert USD to atomic units (6 decimals) and back")
    price.add_argument("usd", nargs="?", metavar="USD", help="a USD amount, e.g. 0.05")
    price.add_argument("--atomic", metavar="N", help="atomic units to show in USD")
    price.set_defaults(run=convert)


def convert(args: argparse.Namespace, out: Output) -> int:
    if (args.usd is None) == (args.atomic is None):
        raise usage("Give a USD amount (svc price 0.05) or atomic units "
                    "(svc price --atomic 50000): exactly one of them.")
    try:
        atomic = usd_to_atomic(args.usd) if args.usd is not None else parse_atomic(args.atomic)
    except AmountError as exc:
        raise usage(str(exc)) from exc
    usd = atomic_to_usd(atomic)
    line = (f"{usd} USD = {atomic} atomic units" if args.usd is not None
            else f"{atomic} atomic units = {usd} USD")
    out.emit({"usd": usd, "atomic": str(atomic)}, [line])
    return ExitCode.OK
