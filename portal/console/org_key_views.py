"""HTML of the organization keys page (``/keys``): keys that act on every app of an
organization. Takes ``key_view`` shapes, which never hold a secret."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from starlette.responses import HTMLResponse

from payments.errors import ApiError
from portal.console.key_views import View, key_form, key_table
from portal.console.layout import Nav, alert, attr, error_headers, notice, page

NOTICES = {"key-revoked": "Organization key revoked. Requests with it are refused from now on."}


@dataclass(frozen=True)
class OrganizationKeys:
    organizations: list[tuple[str, str]]  # (id, name) of the caller's organizations
    keys: list[View]


def org_keys_page(nav: Nav, state: OrganizationKeys, *, done: str | None = None,
                  error: ApiError | None = None) -> HTMLResponse:
    body = (
        "<h1>Organization API keys</h1>"
        f"{notice(NOTICES.get(done or ''))}"
        "<p>An organization key may act on <strong>every app of its organization</strong>, "
        "those it has today and those made later. A backend serving one app is safer with "
        "that app's own key, made on the app's page. Only a developer signed in here "
        "manages organization keys; CLI grants, scoped to one app, cannot.</p>"
        f"<section id=\"keys\" aria-labelledby=\"keys-h\">{_key_lists(nav, state, error)}"
        "<h3>Create an organization key</h3>"
        f"{key_form(nav, '/keys/new', _organization_field(state.organizations))}</section>")
    return page("Organization keys", body, nav=nav, status=error.status if error else 200,
                headers=error_headers(error))


def _key_lists(nav: Nav, state: OrganizationKeys, error: ApiError | None) -> str:
    if len(state.organizations) <= 1:
        names = ", ".join(name for _, name in state.organizations)
        return (f"<h2 id=\"keys-h\">Keys of organization {escape(names)}</h2>{alert(error)}"
                f"{key_table(nav, state.keys, '/keys')}")
    # One list per organization: a member of several could not tell their keys apart.
    lists = "".join(
        f"<h3>{escape(name)}</h3>"
        f"{key_table(nav, [k for k in state.keys if k['organizationId'] == i], '/keys')}"
        for i, name in state.organizations)
    return f"<h2 id=\"keys-h\">Keys of your organizations</h2>{alert(error)}{lists}"


def _organization_field(organizations: list[tuple[str, str]]) -> str:
    # Members of one organization (everyone today) are not asked which.
    if len(organizations) == 1:
        return ""
    options = "".join(f"<option value=\"{attr(i)}\">{escape(n)}</option>"
                      for i, n in organizations)
    return ("<label for=\"organization\">Organization</label>"
            f"<select id=\"organization\" name=\"organizationId\">{options}</select>")

