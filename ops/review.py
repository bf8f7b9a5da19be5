"""``svc-ops review|pay-to|listing|actions|notifications``: reviews and what operators look
at.

- ``review``: the hosted-app review queue of spec 1.2 rule 4 (allowlisted developers first;
  categories rejected by default; extra-review categories need a note) and the hosting
  allowlist of developers.
- ``pay-to``: binding or changing ``pay_to`` starts a review; approval moves ``testing`` to
  ``approved`` (spec 3.4) for the address the operator names.
- ``listing``: the same change puts the portal listing under review (``pending_review``);
  approval, over an approved ``pay_to``, makes the app ``listed`` (spec 2.2), so its
  hosted entry ``{portal_url}/<app-slug>`` answers; rejection takes it off the portal.
- ``actions``: the audit log of operator decisions; ``notifications``: the internal
  notifications (``developer_app_requested``, ``runtime_domain_requested``).
"""

from __future__ import annotations

import argparse
import json

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ops.runtime import app_slug, changed, operator_name, operator_option
from payments.db import transaction, utcnow
from payments.models import App, PayToStatus
from payments.runtime import operator as decide
from payments.runtime.review import EXTRA_REVIEW, REJECTED_BY_DEFAULT
from router.settings import Settings
from svc.int_flags import whole_number


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    who = operator_option()
    categories = ", ".join([*REJECTED_BY_DEFAULT, *EXTRA_REVIEW])
    review = sub.add_parser("review", help="the hosted-app review queue (spec 1.2 rule 4)")
    review_sub = review.add_subparsers(dest="action", required=True)
    review_sub.add_parser("list", help="apps waiting, allowlisted developers first")
    for action in ("approve", "reject"):
        cmd = review_sub.add_parser(action, parents=[who], help=f"{action} an app")
        cmd.add_argument("app", help="app slug or id")
        cmd.add_argument("--category", action="append", default=[], metavar="NAME",
                         help=f"a category the app falls into (repeat): {categories}")
        cmd.add_argument("--note", default="", help="what the review found")
    for action, text in (("allow-developer", "review a developer's apps first"),
                         ("unlist-developer", "remove a developer from the allowlist")):
        cmd = review_sub.add_parser(action, parents=[who], help=text)
        cmd.add_argument("developer", help="email or username")
        cmd.add_argument("--note", default="")
    pay_to = sub.add_parser("pay-to", help="pay_to review (testing -> approved)")
    pay_to_sub = pay_to.add_subparsers(dest="action", required=True)
    pay_to_sub.add_parser("list", help="apps whose pay_to waits for review")
    approve = pay_to_sub.add_parser("approve", parents=[who], help="approve an app's pay_to")
    approve.add_argument("app")
    approve.add_argument("address", help="the address you reviewed (must be the current one)")
    listing = sub.add_parser("listing", help="portal listing review (pending_review -> listed)")
    listing_sub = listing.add_subparsers(dest="action", required=True)
    listing_sub.add_parser("list", help="apps whose listing waits for review")
    approve = listing_sub.add_parser("approve", parents=[who],
                                     help="list an app on the portal (its pay_to approved)")
    approve.add_argument("app", help="app slug or id")
    approve.add_argument("--note", default="", help="what the review found")
    reject = listing_sub.add_parser("reject", parents=[who],
                                    help="refuse, or take a listed app off the portal")
    reject.add_argument("app", help="app slug or id")
    reject.add_argument("--reason", required=True)
    actions = sub.add_parser("actions", help="the operator audit log, newest first")
    actions.add_argument("--app", help="only this app")
    actions.add_argument("--limit", type=whole_number, default=50)
    notes = sub.add_parser("notifications", help="internal operator notifications")
    notes.add_argument("--all", action="store_true", help="include handled ones")


def run(args: argparse.Namespace, settings: Settings, sessions: sessionmaker[Session]) -> int:
    if args.command == "review":
        return _review(args, settings, sessions)
    if args.command == "pay-to":
        return _pay_to(args, settings, sessions)
    if args.command == "listing":
        return _listing(args, settings, sessions)
    if args.command == "actions":
        return _actions(args, sessions)
    return _notifications(args, sessions)


def _review(args: argparse.Namespace, settings: Settings,
            sessions: sessionmaker[Session]) -> int:
    if args.action == "list":
        with sessions() as session:
            queue = decide.review_queue(session)
            for app, allowlisted in queue:
                print(f"{app.slug}\t{app.name}\t{'allowlisted' if allowlisted else '-'}\t"
                      f"domain={app.runtime_domain_request_status.value}\t"
                      f"runtime={app.runtime_status.value}")
            if not queue:
                print("the review queue is empty")
        return 0
    who = operator_name(args)
    if args.action in ("allow-developer", "unlist-developer"):
        add = args.action == "allow-developer"
        with transaction(sessions) as session:
            name = decide.allowlist_developer(session, args.developer, who, utcnow(),
                                              add=add, note=args.note)
        print(f"{'allowlisted' if add else 'removed from the allowlist'}: {name}; "
              f"recorded for {who}")
        return 0
    approve = args.action == "approve"
    slug = app_slug(sessions, args.app)

    def decision(session: Session) -> None:
        decide.review(session, decide.find_app(session, slug), who, utcnow(),
                      approve=approve, categories=args.category, note=args.note)
    changed(settings, sessions, decision, slug)
    print(f"review {'approved' if approve else 'rejected'} for {slug}; recorded for {who}")
    return 0


def _pay_to(args: argparse.Namespace, settings: Settings,
            sessions: sessionmaker[Session]) -> int:
    if args.action == "list":
        with sessions() as session:
            apps = session.scalars(select(App).where(
                App.pay_to_status == PayToStatus.TESTING).order_by(App.updated_at)).all()
            for app in apps:
                print(f"{app.slug}\t{app.pay_to}\t{app.recipient_allowlist_status.value}")
            if not apps:
                print("no pay_to waits for review")
        return 0
    who = operator_name(args)
    slug = app_slug(sessions, args.app)

    def approve(session: Session) -> None:
        decide.approve_pay_to(session, decide.find_app(session, slug), who, utcnow(),
                              args.address)
    changed(settings, sessions, approve, slug)
    print(f"pay_to {args.address} approved for {slug}; recorded for {who}")
    return 0


def _listing(args: argparse.Namespace, settings: Settings,
             sessions: sessionmaker[Session]) -> int:
    if args.action == "list":
        with sessions() as session:
            apps = decide.listing_queue(session)
            for app in apps:
                print(f"{app.slug}\t{app.name}\t{app.pay_to}\tpay_to={app.pay_to_status.value}")
            if not apps:
                print("no listing waits for review")
        return 0
    who = operator_name(args)
    slug = app_slug(sessions, args.app)
    approve = args.action == "approve"

    def decision(session: Session) -> None:
        decide.decide_listing(session, decide.find_app(session, slug), who, utcnow(),
                              approve=approve, note=args.note if approve else args.reason)
    changed(settings, sessions, decision, slug)
    print(f"listing {'approved' if approve else 'rejected'} for {slug}; recorded for {who}")
    return 0


def _actions(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        app = decide.find_app(session, args.app) if args.app else None
        for row in decide.actions(session, app, max(1, min(args.limit, 1000))):
            print(f"{row.created_at.isoformat()}\t{row.operator}\t{row.action.value}\t"
                  f"{row.subject}\t{json.dumps(row.detail, sort_keys=True)}")
    return 0


def _notifications(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        rows = decide.notifications(session, include_handled=args.all)
        for row in rows:
            handled = row.handled_at.isoformat() if row.handled_at else "open"
            print(f"{row.id}\t{row.created_at.isoformat()}\t{row.kind.value}\t{handled}\t"
                  f"{json.dumps(row.payload, sort_keys=True)}")
        if not rows:
            print("no open notifications")
    return 0
