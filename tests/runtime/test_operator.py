"""``svc-ops`` decisions: domain approval against DNS (a server on loopback standing in for
public DNS), rejections, ``pay_to`` review, the hosted-app review queue, the audit log."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import select

from payments.db import transaction, utcnow
from payments.developer.models import NotificationKind, OperatorNotification
from payments.models import (
    AllowlistStatus,
    App,
    DomainRequestStatus,
    HostedReviewStatus,
    PayToStatus,
    RuntimeStatus,
)
from payments.runtime import operator as decide
from payments.runtime.models import OperatorAction
from tests.factories import add_developer, add_owned_app, update_app
from tests.manifest.origin import PAY_TO
from tests.runtime.world import SLUG, World

HOST = f"{SLUG}.apps.localhost"


def requested(world: World, **fields: object) -> None:
    """The app as a verified runtime with a pending domain request."""
    values: dict[str, object] = {
        "runtime_origin": world.origin_url, "runtime_status": RuntimeStatus.ACTIVE,
        "runtime_domain_request_status": DomainRequestStatus.PENDING_MANUAL_DNS,
        "runtime_domain_requested_at": utcnow(),
        "hosted_review_status": HostedReviewStatus.APPROVED, **fields}
    update_app(world.sessions, SLUG, **values)
    with transaction(world.sessions) as session:
        session.add(OperatorNotification(kind=NotificationKind.RUNTIME_DOMAIN_REQUESTED,
                                         app_id=world.app_id, payload={"slug": SLUG}))


def app(world: World) -> App:
    with world.sessions() as session:
        return session.scalars(select(App).where(App.slug == SLUG)).one()


def actions(world: World) -> list[tuple[str, str, str]]:
    with world.sessions() as session:
        return [(a.operator, a.action.value, a.subject) for a in session.scalars(
            select(OperatorAction).order_by(OperatorAction.id))]


def test_domain_approval_asks_dns(world: World) -> None:
    requested(world)
    refusals = [
        ([], f"{HOST} cannot be approved yet: {HOST} has no A or AAAA record"),
        (["203.0.113.9"], f"{HOST} resolves to 203.0.113.9, not only to the router"),
        (["127.0.0.1", "2001:db8::7"], "resolves to 2001:db8::7, not only to the router"),
    ]
    for answers, words in refusals:
        if answers:
            world.dns.records[HOST] = answers
        else:
            world.dns.records.pop(HOST, None)
        code, _, err = world.ops("domain", "approve", SLUG)
        assert code == 1 and words in err, err
    world.dns.records[HOST] = ["127.0.0.1"]
    world.dns.silent.add(HOST)
    world.settings = replace(world.settings, runtime_fetch_timeout=0.5)  # DNS waits this
    code, _, err = world.ops("domain", "approve", SLUG)
    assert code == 1 and "no DNS answer in time; try again" in err
    assert app(world).runtime_domain_request_status is DomainRequestStatus.PENDING_MANUAL_DNS
    assert actions(world) == []  # refusals decide nothing
    world.dns.silent.clear()
    code, out, err = world.ops("domain", "list")
    assert code == 0 and out.startswith(f"{SLUG}\t{HOST}\tpending_manual_dns\t")
    code, out, err = world.ops("domain", "approve", world.app_id)  # by id works too
    assert code == 0, err
    assert actions(world) == [("opsuser", "domain_approved", HOST)]
    assert world.ops("domain", "approve", SLUG)[2].strip() == (
        f"svc-ops: {SLUG} has no pending domain request (status approved).")
    assert world.ops("domain", "list")[1].strip() == "no pending domain requests"
    assert world.ops("domain", "list", "--all")[1].startswith(f"{SLUG}\t{HOST}\tapproved")


def test_dns_check_needs_router_addresses_and_is_only_skipped_in_dev(world: World) -> None:
    requested(world)
    world.settings = replace(world.settings, router_addresses=())
    code, _, err = world.ops("domain", "approve", SLUG)
    assert code == 1 and "Set SVCSRV_ROUTER_ADDRESSES" in err
    code, out, err = world.ops("domain", "approve", SLUG, "--skip-dns-check")
    assert code == 0, err
    assert "DNS: not checked (dev)" in out
    with world.sessions() as session:
        row = session.scalars(select(OperatorAction)).one()
        assert row.detail["dnsChecked"] is False


def test_reject_and_the_page_says_so(world: World) -> None:
    requested(world)
    code, out, err = world.ops("domain", "reject", SLUG, "--reason", "not our customer",
                               "--operator", "carol")
    assert code == 0, err
    assert app(world).runtime_domain_request_status is DomainRequestStatus.REJECTED
    assert "was rejected" in world.visit().text
    with world.sessions() as session:
        note = session.scalars(select(OperatorNotification)).one()
        assert note.handled_at is not None
        row = session.scalars(select(OperatorAction)).one()
        assert (row.operator, row.detail["reason"]) == ("carol", "not our customer")
    code, out, _ = world.ops("notifications", "--all")
    assert "runtime_domain_requested" in out and "open" not in out.split("\t")[3]


def test_every_decision_names_an_operator(world: World) -> None:
    requested(world)
    # A name that will not do is bad input: exit 2, as all bad input, and nothing recorded.
    blank = ("svc-ops: Name the operator deciding: --operator NAME ({} is blank); the name is "
             "recorded with the decision.\n")
    for name, said in ((" ", blank.format("--operator")), ("", blank.format("--operator")),
                       ("o" * 121, "svc-ops: The operator's name (--operator) is 121 "
                                   "characters; at most 120.\n")):
        code, _, err = world.ops("kill-switch", "on", SLUG, "--reason", "x", "--operator", name)
        assert (code, err) == (2, said), name
    assert world.ops("kill-switch", "on", SLUG, "--reason", "x", user=" ")[:3:2] == (
        2, blank.format("$USER"))
    code, out, err = world.ops("kill-switch", "on", SLUG, "--reason", "phishing report")
    assert code == 0 and "recorded for opsuser" in out  # $USER when --operator is not given
    assert world.ops("kill-switch", "on", SLUG, "--reason", "again")[1].startswith(
        "kill switch already on")
    assert world.ops("kill-switch", "list")[1] == f"{SLUG}\tphishing report\n"
    assert actions(world) == [("opsuser", "kill_switch_on", SLUG)]


def test_pay_to_review(world: World) -> None:
    code, out, _ = world.ops("pay-to", "list")
    assert out.startswith(f"{SLUG}\t{PAY_TO}\t")
    code, _, err = world.ops("pay-to", "approve", SLUG, "0x" + "1" * 40)
    assert code == 1 and "review the current address" in err
    code, _, err = world.ops("pay-to", "approve", SLUG, PAY_TO.lower(), "--operator", "dora")
    assert code == 0, err
    assert app(world).pay_to_status is PayToStatus.APPROVED
    code, _, err = world.ops("pay-to", "approve", SLUG, PAY_TO)
    assert code == 1 and "no pay_to waiting for review (status approved)" in err
    assert actions(world) == [("dora", "pay_to_approved", PAY_TO)]
    assert world.ops("pay-to", "list")[1].strip() == "no pay_to waits for review"


def test_hosted_app_review_queue(world: World) -> None:
    requested(world, hosted_review_status=HostedReviewStatus.PENDING)
    # A second developer on the hosting allowlist is reviewed first.
    _, other_org = add_developer(world.sessions, "trusted", email="trusted@example.com")
    add_owned_app(world.sessions, other_org, "trusted-game",
                  hosted_review_status=HostedReviewStatus.PENDING,
                  runtime_domain_requested_at=utcnow())
    assert world.ops("review", "list")[1].splitlines()[0].startswith(f"{SLUG}\t")
    code, _out, err = world.ops("review", "allow-developer", "trusted@example.com",
                               "--note", "known studio")
    assert code == 0, err
    queue = world.ops("review", "list")[1].splitlines()
    assert queue[0].startswith("trusted-game\tTrusted Game\tallowlisted")
    assert queue[1].startswith(f"{SLUG}\t")

    code, _, err = world.ops("review", "approve", SLUG, "--category", "gambling")
    assert code == 1 and "rejected by default" in err
    code, _, err = world.ops("review", "approve", SLUG, "--category", "ugc")
    assert code == 1 and "need a manual review" in err
    code, _, err = world.ops("review", "approve", SLUG, "--category", "spam")
    assert code == 1 and "Unknown review categories: spam" in err
    code, _, err = world.ops("review", "approve", SLUG, "--category", "ugc", "--category",
                             "ai_media", "--note", "moderation queue checked")
    assert code == 0, err
    row = app(world)
    assert row.hosted_review_status is HostedReviewStatus.APPROVED
    assert row.hosted_review_categories == ["ugc", "ai_media"]

    # Rejecting the review also rejects the app's domain, approved or pending.
    assert world.ops("domain", "approve", SLUG)[0] == 0
    code, _, err = world.ops("review", "reject", SLUG, "--category", "phishing",
                             "--note", "credential form")
    assert code == 0, err
    row = app(world)
    assert row.hosted_review_status is HostedReviewStatus.REJECTED
    assert row.runtime_domain_request_status is DomainRequestStatus.REJECTED
    assert [a[1] for a in actions(world)] == [
        "developer_allowlisted", "review_approved", "domain_approved", "review_rejected",
        "domain_rejected"]
    assert world.ops("review", "unlist-developer", "trusted")[0] == 0
    assert "allowlisted" not in world.ops("review", "list")[1]


def test_allowlist_owner_transactions_are_recorded(world: World) -> None:
    with transaction(world.sessions) as session:
        decide.record_allowlist(session, "erin", utcnow(), address=PAY_TO.lower(), add=True)
    with world.sessions() as session:
        row = session.scalars(select(OperatorAction)).one()
    assert (row.operator, row.action.value, row.subject) == ("erin", "allowlist_add",
                                                             PAY_TO.lower())
    assert row.detail["apps"] == [world.app_id]
    _code, out, _ = world.ops("actions")
    assert "\terin\tallowlist_add\t" in out


def test_in_process_chain_refuses_allowlist_commands(world: World) -> None:
    code, _, err = world.ops("allowlist", "sync")
    assert code == 2 and "in-process chain" in err
    code, _, err = world.ops("chain", "reconcile")
    assert code == 2 and "in-process chain" in err
    assert actions(world) == []  # nothing happened, nothing recorded


def test_dev_allowlist_decision_goes_to_the_ledger_for_the_dev_chain(world: World) -> None:
    # In dev the chain lives inside the server, which mirrors what the ledger calls allowed.
    update_app(world.sessions, SLUG, recipient_allowlist_status=AllowlistStatus.NOT_ALLOWED)
    code, _, err = world.ops("allowlist", "add", "0xnot-an-address")
    assert code == 2 and "not a 0x address" in err
    code, out, err = world.ops("allowlist", "add", PAY_TO)
    assert code == 0, err
    assert "1 app(s) updated" in out
    assert app(world).recipient_allowlist_status is AllowlistStatus.ALLOWED
    code, out, err = world.ops("allowlist", "remove", PAY_TO)
    assert code == 0, err
    assert app(world).recipient_allowlist_status is AllowlistStatus.NOT_ALLOWED
    assert [a[1] for a in actions(world)] == ["allowlist_add", "allowlist_remove"]
