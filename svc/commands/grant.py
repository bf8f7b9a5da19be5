"""The stored grant, turned into a client for the API that issued it."""

from __future__ import annotations

import argparse

from svc.client import DEFAULT_TIMEOUT, DeveloperClient
from svc.errors import CliError, ExitCode, not_signed_in
from svc.grant_store import GrantStore, StoredGrant
from svc.project import api_url_from_environment


def signed_in(args: argparse.Namespace, timeout: float = DEFAULT_TIMEOUT
              ) -> tuple[DeveloperClient, StoredGrant]:
    stored = GrantStore().load()
    if stored is None:
        raise not_signed_in()
    return DeveloperClient(issuer_url(args, stored), stored.token, timeout=timeout), stored


def issuer_url(args: argparse.Namespace, stored: StoredGrant) -> str:
    """The API URL in effect, which must be the one that issued the grant.

    A token goes only to the API that issued it, never to whatever URL a flag or a
    project file names later.
    """
    api_url = api_url_from_environment(args.api_url, stored.api_url)
    if api_url != stored.api_url:
        raise CliError(f"The stored grant was issued by {stored.api_url}, not {api_url}; "
                       "sign in to that API first.", ExitCode.SIGN_IN, code="grant_other_api",
                       command=f"svc auth browser --api-url {api_url}")
    return api_url
