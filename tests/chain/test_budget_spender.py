"""BudgetSpenderV2 on the in-process chain: permits, the allowlist, batches, double settlement."""

from __future__ import annotations

from eth_utils.crypto import keccak
from web3.logs import DISCARD

from payments.chain.contracts import charge_id
from tests.chain.chain_env import BUDGET, ChainEnv, PairArg, user_account


def test_relayer_relays_permit(env: ChainEnv) -> None:
    user = user_account(0)
    env.relay_permit(user, 1_234_567)
    assert env.usdc.functions.allowance(user.address, env.spender.address).call() == 1_234_567
    assert env.usdc.functions.nonces(user.address).call() == 1


def test_non_relayer_cannot_relay_permit(env: ChainEnv) -> None:
    user = user_account(0)
    args = env.sign_permit(user, 1_000)
    fn = env.spender.functions.relayPermit(user.address, *args)
    failure = env.expect_revert(fn, env.stranger)
    assert failure.name == "NotRelayer"
    assert failure.args == {"caller": env.stranger}
    assert env.expect_revert(fn, env.owner).name == "NotRelayer"


def test_permit_for_another_spender_is_rejected(env: ChainEnv) -> None:
    user = user_account(0)
    args = env.sign_permit(user, 1_000, spender=env.relayer)
    fn = env.spender.functions.relayPermit(user.address, *args)
    assert env.expect_revert(fn, env.relayer).name == "ERC2612InvalidSigner"


def test_expired_permit_is_rejected(env: ChainEnv) -> None:
    user = user_account(0)
    args = env.sign_permit(user, 1_000, deadline=1)
    fn = env.spender.functions.relayPermit(user.address, *args)
    assert env.expect_revert(fn, env.relayer).name == "ERC2612ExpiredSignature"


def test_charge_to_non_allowlisted_recipient_fails(env: ChainEnv) -> None:
    user = user_account(0)
    env.fund(user)
    outsider = env.recipients[2]
    single = env.spender.functions.charge(charge_id(1), user.address, outsider, 10_000)
    failure = env.expect_revert(single, env.relayer)
    assert (failure.name, failure.args) == ("RecipientNotAllowed", {"recipient": outsider})
    batch = env.batch(
        [
            (user.address, env.recipients[0], [(charge_id(2), 10_000)]),
            (user.address, outsider, [(charge_id(3), 10_000)]),
        ]
    )
    assert env.expect_revert(batch, env.relayer).name == "RecipientNotAllowed"
    assert env.balance(outsider) == 0


def test_batch_moves_exact_amounts_and_proves_each_charge(env: ChainEnv) -> None:
    users = [user_account(i) for i in range(3)]
    for user in users:
        env.fund(user)
    before = {a: env.balance(a) for a in [u.address for u in users] + env.recipients[:2]}
    pairs: list[PairArg] = []
    expected: list[tuple[bytes, str, str, int]] = []
    seq = 1_000
    for u, user in enumerate(users):
        for r, recipient in enumerate(env.recipients[:2]):
            charges = []
            for k in range(u + r + 1):
                seq += 1
                amount = 10_000 * (k + 1) + u
                charges.append((charge_id(seq), amount))
                expected.append((charge_id(seq), user.address, recipient, amount))
            pairs.append((user.address, recipient, charges))

    receipt = env.ok(env.batch(pairs), env.relayer)

    events = env.spender.events.ChargeSettled().process_receipt(receipt, errors=DISCARD)
    proven = [
        (e["args"]["chargeId"], e["args"]["owner"], e["args"]["recipient"], e["args"]["amount"])
        for e in events
    ]
    assert proven == expected
    for address, start in before.items():
        paid = sum(a for _, o, _, a in expected if o == address)
        earned = sum(a for _, _, r, a in expected if r == address)
        assert env.balance(address) == start - paid + earned
    assert env.balance(env.spender.address) == 0
    assert all(env.spender.functions.isSettled(cid).call() for cid, *_ in expected)
    assert not env.spender.functions.isSettled(charge_id(seq + 1)).call()


def test_resettling_any_charge_reverts(env: ChainEnv) -> None:
    user = user_account(0)
    env.fund(user)
    shop, arcade = env.recipients[:2]
    settled = [charge_id(n) for n in (255, 256, 257)] + [keccak(text="arbitrary id")]
    env.ok(env.batch([(user.address, shop, [(cid, 10_000) for cid in settled])]), env.relayer)

    for old in settled:
        fresh = charge_id(9_000 + settled.index(old))
        replay = env.batch(
            [(user.address, arcade, [(fresh, 10_000)]), (user.address, shop, [(old, 10_000)])]
        )
        failure = env.expect_revert(replay, env.relayer)
        assert (failure.name, failure.args) == ("ChargeAlreadySettled", {"chargeId": old})
        assert not env.spender.functions.isSettled(fresh).call()  # the batch is atomic
        single = env.spender.functions.charge(old, user.address, shop, 10_000)
        assert env.expect_revert(single, env.relayer).name == "ChargeAlreadySettled"


def test_duplicate_inside_one_batch_reverts(env: ChainEnv) -> None:
    user = user_account(0)
    env.fund(user)
    shop, arcade = env.recipients[:2]
    dup = charge_id(42)
    batch = env.batch(
        [(user.address, shop, [(dup, 10_000)]), (user.address, arcade, [(dup, 10_000)])]
    )
    failure = env.expect_revert(batch, env.relayer)
    assert (failure.name, failure.args) == ("ChargeAlreadySettled", {"chargeId": dup})


def test_revoked_permit_makes_later_batch_fail(env: ChainEnv) -> None:
    payer, revoker = user_account(0), user_account(1)
    env.fund(payer)
    env.fund(revoker)
    shop = env.recipients[0]
    env.ok(env.batch([(revoker.address, shop, [(charge_id(1), 10_000)])]), env.relayer)
    env.relay_permit(revoker, 0)
    assert env.usdc.functions.allowance(revoker.address, env.spender.address).call() == 0

    batch = env.batch(
        [
            (payer.address, shop, [(charge_id(2), 10_000)]),
            (revoker.address, shop, [(charge_id(3), 10_000), (charge_id(4), 20_000)]),
        ]
    )
    failure = env.expect_revert(batch, env.relayer)
    assert failure.name == "PairTransferFailed"
    assert failure.args["pairIndex"] == 1
    assert failure.args["owner"] == revoker.address
    assert failure.args["amount"] == 30_000
    assert failure.inner is not None
    assert failure.inner.name == "ERC20InsufficientAllowance"
    assert failure.inner.args["allowance"] == 0


def test_budget_is_enforced_per_pair_total(env: ChainEnv) -> None:
    user = user_account(0)
    env.fund(user, budget=25_000)
    charges = [(charge_id(n), 10_000) for n in (1, 2, 3)]
    batch = env.batch([(user.address, env.recipients[0], charges)])
    failure = env.expect_revert(batch, env.relayer)
    assert failure.inner is not None
    assert failure.inner.args["needed"] == 30_000
    assert failure.inner.args["allowance"] == 25_000


def test_empty_pair_reverts(env: ChainEnv) -> None:
    user = user_account(0)
    env.fund(user)
    failure = env.expect_revert(env.batch([(user.address, env.recipients[0], [])]), env.relayer)
    assert (failure.name, failure.args) == ("EmptyPair", {"pairIndex": 0})


def test_non_relayer_cannot_charge(env: ChainEnv) -> None:
    user = user_account(0)
    env.fund(user)
    shop = env.recipients[0]
    batch = env.batch([(user.address, shop, [(charge_id(1), 10_000)])])
    single = env.spender.functions.charge(charge_id(2), user.address, shop, 10_000)
    for caller in (env.stranger, env.owner):
        assert env.expect_revert(batch, caller).name == "NotRelayer"
        assert env.expect_revert(single, caller).name == "NotRelayer"
    env.ok(env.spender.functions.setRelayer(env.relayer, False), env.owner)
    assert env.expect_revert(batch, env.relayer).name == "NotRelayer"
    assert env.usdc.functions.allowance(user.address, env.spender.address).call() == BUDGET


def test_single_charge_settles(env: ChainEnv) -> None:
    user = user_account(0)
    env.fund(user)
    shop = env.recipients[0]
    receipt = env.ok(
        env.spender.functions.charge(charge_id(7), user.address, shop, 10_000), env.relayer
    )
    (event,) = env.spender.events.ChargeSettled().process_receipt(receipt, errors=DISCARD)
    assert event["args"]["chargeId"] == charge_id(7)
    assert env.balance(shop) == 10_000


def test_only_owner_manages_allowlist_and_relayers(env: ChainEnv) -> None:
    newcomer = env.recipients[2]
    for caller in (env.relayer, env.stranger):
        for fn in (
            env.spender.functions.setAllowedRecipient(newcomer, True),
            env.spender.functions.setRelayer(caller, True),
        ):
            failure = env.expect_revert(fn, caller)
            assert failure.name == "OwnableUnauthorizedAccount"
            assert failure.args == {"account": caller}
    assert not env.spender.functions.allowedRecipients(newcomer).call()

    receipt = env.ok(env.spender.functions.setAllowedRecipient(newcomer, True), env.owner)
    (event,) = env.spender.events.AllowedRecipientSet().process_receipt(receipt, errors=DISCARD)
    assert event["args"] == {"recipient": newcomer, "allowed": True}
    assert env.spender.functions.allowedRecipients(newcomer).call()

    receipt = env.ok(env.spender.functions.setRelayer(env.stranger, True), env.owner)
    (event,) = env.spender.events.RelayerSet().process_receipt(receipt, errors=DISCARD)
    assert event["args"] == {"relayer": env.stranger, "allowed": True}
    assert env.spender.functions.relayers(env.stranger).call()
