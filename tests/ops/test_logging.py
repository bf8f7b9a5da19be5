"""``svc-ops``'s log lines (ops/logs.py): stderr, svc-server's format, INFO with ``--verbose``,
and no key material in them, whatever a message or a traceback held."""

from __future__ import annotations

import logging

import pytest
from eth_account import Account

from ops.logs import stderr_logging, withhold
from payments.chain.in_process import DEPLOYER_KEY, RELAYER_KEY
from router.log_mask import MASK
from router.settings import Settings
from tests.chain.world import recipient
from tests.ops.conftest import Ops

OWNER = str(Account.from_key(DEPLOYER_KEY).address)


def key_material(text: str) -> list[str]:
    """Which of the two keys ``text`` holds, in any case, with or without 0x."""
    return [name for name, key in (("owner", DEPLOYER_KEY), ("relayer", RELAYER_KEY))
            if key.hex() in text.lower()]


def test_a_verbose_owner_transaction_logs_its_line_and_no_key(ops: Ops) -> None:
    args = ("relayer", "add", recipient(2))
    code, out, err = ops.owner("--verbose", *args, RELAYER_KEY=RELAYER_KEY.hex())

    assert code == 0, err
    assert (f"INFO ops.relayers: relayer add {recipient(2)}: setRelayer signed by the owner "
            f"{OWNER}\n") in err
    assert key_material(out + err) == []
    code, out, err = ops.owner(*args, RELAYER_KEY=RELAYER_KEY.hex())  # not verbose: no INFO
    assert code == 0 and "INFO" not in err and key_material(out + err) == []


@pytest.mark.parametrize("place", ["after the command", "between the group and command"])
def test_verbose_is_taken_after_the_command_too(ops: Ops, place: str) -> None:
    """As in `svc`: `svc-ops relayer add ADDRESS --verbose` (and `relayer --verbose add`)
    log at INFO as `svc-ops --verbose relayer add` does; it used to be a usage error."""
    address = recipient(3)
    args = (("relayer", "add", address, "--verbose") if place == "after the command"
            else ("relayer", "--verbose", "add", address))
    code, out, err = ops.owner(*args)

    assert code == 0, err
    assert f"INFO ops.relayers: relayer add {address}: setRelayer signed by the owner" in err
    assert key_material(out + err) == []


def test_no_secret_reaches_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    """What the settings hold, the owner key once read, and what the config secret guard
    recognizes are masked, in the message and in a traceback; transaction hashes stay."""
    settings = Settings(
        chain_backend="json_rpc", chain_rpc_url="https://node.example.com/v2/RPC-API-KEY-42",
        spender_address="0x" + "11" * 20, relayer_key="0x" + RELAYER_KEY.hex().upper(),
        database_url="postgresql://svc:db-pass-7Q@db/svc")
    tx_hash = "0x" + "ab" * 32
    log = logging.getLogger("ops.test")
    with stderr_logging(settings, verbose=True):
        withhold(DEPLOYER_KEY.hex())
        log.info("relayer key %s, owner 0x%s, tx %s", RELAYER_KEY.hex(), DEPLOYER_KEY.hex(),
                 tx_hash)
        log.warning("POST /v2/RPC-API-KEY-42 to https://node.example.com/v2/RPC-API-KEY-42; "
                    "password db-pass-7Q; zpk_live_Qx81 and Bearer abcdefghijkl; "
                    "https://u:hunter22@example.com/x")
        try:
            raise RuntimeError(f"failed with {RELAYER_KEY.hex()}")
        except RuntimeError:
            log.exception("a library's failure")
    log.warning("after the command: not ours to write")

    err = capsys.readouterr().err
    assert key_material(err) == []
    for secret in ("RPC-API-KEY-42", "db-pass-7Q", "zpk_live", "abcdefghijkl", "hunter22"):
        assert secret not in err
    lines = err.splitlines()
    assert lines[0] == f"INFO ops.test: relayer key {MASK}, owner {MASK}, tx {tx_hash}"
    assert lines[1].startswith("WARNING ops.test: POST [withheld] to [withheld]; password ")
    assert "ERROR ops.test: a library's failure" in err and f"failed with {MASK}" in err
    assert "after the command" not in err  # the handler left with the command
