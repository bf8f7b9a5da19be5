"""``svc auth browser|device|status|revoke|logout`` (spec 4.10, 5.3)."""

from __future__ import annotations

import argparse
import os
import webbrowser
from pathlib import Path

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.commands.grant import issuer_url
from svc.device_flow import PendingSignIn, wait_for_grant
from svc.errors import CliError, ExitCode
from svc.grant_store import GrantStore, StoredGrant
from svc.output import Output
from svc.project import API_URL_ENV, choose_api_url, choose_app, read_project


def browser(args: argparse.Namespace, out: Output) -> int:
    return _sign_in(args, out, open_browser=not args.no_open)


def device(args: argparse.Namespace, out: Output) -> int:
    return _sign_in(args, out, open_browser=False)


def _sign_in(args: argparse.Namespace, out: Output, *, open_browser: bool) -> int:
    store = GrantStore()
    previous = store.load()
    project = read_project(Path.cwd())
    api_url = choose_api_url(args.api_url, os.environ.get(API_URL_ENV), project,
                             previous.api_url if previous else None)
    with DeveloperClient(api_url) as client:
        started = client.start_sign_in(choose_app(args.app, project), args.scopes, args.ttl)
        pending = PendingSignIn.from_wire(started)
        opened = open_browser and webbrowser.open(pending.verification_uri_complete)
        _announce(out, pending, opened=opened, device=not open_browser)
        grant = wait_for_grant(client, pending)
    store.save(grant)
    out.emit({"event": "signed_in", "grant": grant.public(), "file": str(store.path)},
             [f"Signed in: app {grant.app}, scopes {', '.join(grant.scopes)}, "
              f"expires {grant.expires_at}.", f"Grant saved to {store.path}."])
    return ExitCode.OK


def _announce(out: Output, pending: PendingSignIn, *, opened: bool, device: bool) -> None:
    if device:
        lines = ["On any device, open:", f"  {pending.verification_uri}",
                 f"User code: {pending.user_code}",
                 f"(or open {pending.verification_uri_complete})"]
    else:
        where = "Opened in your browser" if opened else "Open this address in your browser"
        lines = [f"{where}:", f"  {pending.verification_uri_complete}",
                 f"User code: {pending.user_code} (check the console shows the same code)"]
    lines.append(f"Waiting for approval (the request expires in {pending.expires_in}s)...")
    out.emit({"event": "pending", "browserOpened": opened, **pending.public()}, lines)


def status(args: argparse.Namespace, out: Output) -> int:
    stored = _stored_or_fail("Not signed in.")
    with DeveloperClient(issuer_url(args, stored), stored.token) as client:
        try:
            grant = client.grant()["grant"]
        except ApiFailure as failure:
            if failure.status != 401:
                raise
            raise CliError(f"Signed out: {failure.message}", ExitCode.FAILED, code=failure.code,
                           command="svc auth browser") from failure
    public = {**stored.public(), "app": grant["app"], "scopes": grant["scopes"],
              "expiresAt": grant["expiresAt"], "grantId": grant["id"]}
    out.emit({"signedIn": True, "grant": public},
             [f"Signed in to {stored.api_url}", f"  app:     {public['app']}",
              f"  scopes:  {', '.join(public['scopes'])}",
              f"  expires: {public['expiresAt']}", f"  token:   {stored.masked_token}"])
    return ExitCode.OK


def revoke(args: argparse.Namespace, out: Output) -> int:
    stored = _stored_or_fail("Not signed in; there is no grant to revoke.")
    with DeveloperClient(issuer_url(args, stored), stored.token) as client:
        try:
            client.revoke_grant()
            note = "Revoked the grant on the service"
        except ApiFailure as failure:
            if failure.status != 401:
                raise
            note = "The service already refused this grant"
    GrantStore().delete()
    out.emit({"revoked": True, "app": stored.app, "grantId": stored.grant_id},
             [f"{note} and removed the local copy."])
    return ExitCode.OK


def logout(args: argparse.Namespace, out: Output) -> int:
    store = GrantStore()
    stored = store.load()
    revoked = stored is not None and _try_revoke(stored)
    removed = store.delete()
    if revoked:
        text = "Signed out; the grant was revoked on the service."
    elif removed:
        text = ("Signed out locally; the service did not revoke the grant (it may have "
                "expired already, or be unreachable).")
    else:
        text = "Not signed in."
    out.emit({"signedOut": True, "removed": removed, "revokedOnServer": revoked}, [text])
    return ExitCode.OK


def _try_revoke(stored: StoredGrant) -> bool:
    """Best effort, always to the API that issued the grant."""
    try:
        with DeveloperClient(stored.api_url, stored.token) as client:
            client.revoke_grant()
    except (ApiFailure, ServiceUnreachable):
        return False
    return True


def _stored_or_fail(message: str) -> StoredGrant:
    stored = GrantStore().load()
    if stored is None:
        raise CliError(f"{message} Run `svc auth browser` (or `svc auth device`) to sign in.",
                       ExitCode.FAILED, code="not_signed_in", command="svc auth browser")
    return stored
