"""HTML of API keys, shared by an app's page and the organization keys page.

Tables and forms take ``key_view`` shapes, which never hold a secret; only
``key_created_page`` ever receives one.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from html import escape
from typing import Any

from starlette.responses import HTMLResponse

from payments.developer.keys import DEFAULT_KEY_SCOPES, ENVIRONMENTS, KEY_SCOPES
from portal.console.layout import Nav, attr, csrf_field, page

View = dict[str, Any]
# The create form's one-time token (portal.console.key_creation): one key per form.
FORM_TOKEN_FIELD = "formToken"  # noqa: S105  (a field name, not a secret)


def key_table(nav: Nav, keys: list[View], revoke_base: str) -> str:
    """The keys with their previews; each active one with a revoke button posting to
    ``{revoke_base}/{key id}/revoke``."""
    if not keys:
        return "<p>No API keys yet.</p>"
    rows = "".join(_key_row(nav, revoke_base, k) for k in keys)
    return ("<table><thead><tr><th scope=\"col\">Label</th><th scope=\"col\">Key</th>"
            "<th scope=\"col\">Environment</th><th scope=\"col\">Scopes</th>"
            "<th scope=\"col\">Status</th><th scope=\"col\"><span class=\"hint\">Action"
            f"</span></th></tr></thead><tbody>{rows}</tbody></table>")


def _key_row(nav: Nav, revoke_base: str, k: View) -> str:
    name = k["label"] or k["preview"]
    if k["revokedAt"]:
        status, action = "revoked", ""
    else:
        status = "active"
        action = (f"<form class=\"inline\" method=\"post\" action=\"{revoke_base}/"
                  f"{attr(k['id'])}/revoke\">{csrf_field(nav.csrf)}"
                  f"<button class=\"danger\" type=\"submit\" aria-label=\"Revoke key "
                  f"{attr(name)}\">Revoke</button></form>")
    scopes = ", ".join(escape(s) for s in k["scopes"]) or "(legacy: none)"
    return (f"<tr><td>{escape(k['label']) or '—'}</td><td><code>{escape(k['preview'])}</code>"
            f"</td><td>{escape(k['environment'])}</td><td>{scopes}</td><td>{status}</td>"
            f"<td>{action}</td></tr>")


def key_form(nav: Nav, action: str, extra_fields: str = "") -> str:
    """The create form: label, environment, scopes (the defaults checked), and a one-time
    token of its own, new each time the form is shown."""
    # autocomplete=off: a browser going back to the page must not restore the token of the
    # form that already made a key (Firefox restores hidden fields without it).
    token = (f"<input type=\"hidden\" name=\"{FORM_TOKEN_FIELD}\" autocomplete=\"off\" "
             f"value=\"{secrets.token_urlsafe(32)}\">")
    boxes = "".join(
        f"<label><input type=\"checkbox\" name=\"scope\" value=\"{s}\""
        f"{' checked' if s in DEFAULT_KEY_SCOPES else ''}> <code>{s}</code></label><br>"
        for s in KEY_SCOPES)
    envs = "".join(f"<option value=\"{e}\">{e}</option>" for e in ENVIRONMENTS)
    return (
        f"<form class=\"stack\" method=\"post\" action=\"{action}\">"
        f"{csrf_field(nav.csrf)}{token}{extra_fields}<label for=\"label\">Label</label>"
        "<input id=\"label\" name=\"label\" type=\"text\" maxlength=\"120\" "
        "placeholder=\"e.g. production backend\">"
        f"<label for=\"environment\">Environment</label>"
        f"<select id=\"environment\" name=\"environment\">{envs}</select>"
        f"<fieldset><legend>Scopes</legend>{boxes}<span class=\"hint\">The first four are the "
        "defaults; a production backend usually holds all seven.</span></fieldset>"
        "<button type=\"submit\">Create API key</button></form>")


COPY_SCRIPT = """(function () {
  var button = document.getElementById("copy");
  var status = document.getElementById("copy-status");
  button.addEventListener("click", function () {
    var secret = document.getElementById("secret").textContent;
    navigator.clipboard.writeText(secret).then(function () {
      status.textContent = "Copied to the clipboard.";
    }, function () {
      status.textContent = "Copying failed: select the text and copy it by hand.";
    });
  });
})();"""


@dataclass(frozen=True)
class KeyOwner:
    """What a new key belongs to, as its created page names it, and where to go back."""

    kind: str  # "App" or "Organization"
    name: str
    back: str  # a local path


@dataclass(frozen=True)
class NewKey:
    """What a create form's sending made: the key, and its secret the first time only."""

    owner: KeyOwner
    key: View
    secret: str | None  # None: this form made the key before; its secret is gone


def key_answer(nav: Nav, made: NewKey) -> HTMLResponse:
    """The answer to a create form: the secret the first time, after that never again."""
    if made.secret is None:
        return key_already_created_page(nav, made.owner, made.key)
    return key_created_page(nav, made.owner, made.key, made.secret)


def key_created_page(nav: Nav, owner: KeyOwner, key: View, secret: str) -> HTMLResponse:
    """The one page that shows a full secret; sent with ``Cache-Control: no-store``."""
    scopes = ", ".join(escape(s) for s in key["scopes"])
    return page("API key created", (
        "<h1>Copy your API key now</h1>"
        "<p><strong>This is the only time the full key is shown.</strong> We keep only a hash; "
        f"afterwards you will see <code>{escape(key['preview'])}</code>.</p>"
        f"<code id=\"secret\" class=\"secret\">{escape(secret)}</code>"
        "<p class=\"row\"><button id=\"copy\" type=\"button\">Copy key</button>"
        "<span id=\"copy-status\" role=\"status\" aria-live=\"polite\"></span></p>"
        f"<dl><dt>{escape(owner.kind)}</dt><dd>{escape(owner.name)}</dd>"
        f"<dt>Label</dt><dd>{escape(key['label']) or '—'}</dd>"
        f"<dt>Environment</dt><dd>{escape(key['environment'])}</dd>"
        f"<dt>Scopes</dt><dd>{scopes}</dd></dl>"
        "<p>Put it in your backend's secret store (e.g. <code>SVC_API_KEY</code>); never in "
        "frontend code.</p>"
        f"<p><a href=\"{attr(owner.back)}\">I have stored it: back to "
        f"{escape(owner.name)}</a></p>"), nav=nav, script=COPY_SCRIPT)


def key_already_created_page(nav: Nav, owner: KeyOwner, key: View) -> HTMLResponse:
    """A create form sent again (a reload of the secret page): the key it made, by its
    preview only, and no second key. 409, as the API's conflicts."""
    return page("API key already created", (
        "<h1>This key was already created</h1>"
        "<div class=\"notice\" role=\"status\"><p>This form was sent before and created "
        f"the key <code>{escape(key['preview'])}</code>. No other key was created.</p></div>"
        "<p><strong>Its full secret was shown once, in the answer to that first request, and "
        "is never shown again.</strong> If you did not store it, revoke this key and create "
        "a new one.</p>"
        f"<dl><dt>{escape(owner.kind)}</dt><dd>{escape(owner.name)}</dd>"
        f"<dt>Label</dt><dd>{escape(key['label']) or '—'}</dd>"
        f"<dt>Environment</dt><dd>{escape(key['environment'])}</dd>"
        f"<dt>Created</dt><dd>{escape(key['createdAt'])}</dd>"
        f"<dt>Status</dt><dd>{'revoked' if key['revokedAt'] else 'active'}</dd></dl>"
        f"<p><a href=\"{attr(owner.back)}\">Back to the keys of {escape(owner.name)}</a></p>"
        "<p class=\"hint\">Error <code>key_already_created</code> · HTTP 409</p>"),
        nav=nav, status=409)
