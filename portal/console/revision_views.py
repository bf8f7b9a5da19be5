"""HTML of the config revision pages, from the API's JSON shapes (``payments.config.history``).

A revision holds what the developer's file said (names, URLs, metadata) and what the
service stored before: all of it is escaped, and the config is shown as JSON text, never
as markup. A recorded config holds no secret (the API's secret guard refused any); one
recorded before the guard refused them had them withheld (migrations 0018 and 0021), and a
revision whose state (or config) holds the mark is shown as one that cannot be rolled back
to, as the service refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Any

from starlette.responses import HTMLResponse

from payments.config.document import WITHHELD
from payments.config.history import RevisionPage
from portal.console.layout import Nav, attr, page

View = dict[str, Any]

# The order and words of a summary; a revision always changed something, so zero counts
# are left out.
SUMMARY_WORDS = (("create", "created"), ("update", "updated"), ("disable", "disabled"),
                 ("unchanged", "unchanged"))
MODES = {"merge": "merge (declared resources only)",
         "mirror": "mirror (also disables what the file leaves out)"}


@dataclass(frozen=True)
class RevisionList:
    app: str  # slug
    before: int | None  # the page's ``before``; None: the newest page
    page: RevisionPage
    numbers: dict[str, int]  # revision id -> number, of the revisions rolled back to


@dataclass(frozen=True)
class RevisionShown:
    app: str
    revision: View  # revision_detail: the view, its config and ops
    rollback_number: int | None


def revisions_page(nav: Nav, listed: RevisionList) -> HTMLResponse:
    slug = listed.app
    base = f"/apps/{attr(slug)}/config"
    rows = "".join(_row(base, r, listed.numbers) for r in listed.page.revisions)
    if rows:
        body = ("<table><caption class=\"hint\">Newest first. Each apply that changed "
                "something recorded one revision.</caption><thead><tr>"
                "<th scope=\"col\">Revision</th><th scope=\"col\">Applied</th>"
                "<th scope=\"col\">By</th><th scope=\"col\">Mode</th>"
                "<th scope=\"col\">Changes</th><th scope=\"col\">Rollback of</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>")
    elif listed.before is not None:
        body = f"<p>No revisions before #{listed.before}.</p>"
    else:
        body = _empty(slug)
    pages = []
    if listed.before is not None:
        pages.append(f"<a href=\"{base}\">Newest revisions</a>")
    if listed.page.older is not None:
        pages.append(f"<a href=\"{base}?before={listed.page.older}\" rel=\"next\">"
                     "Older revisions</a>")
    more = f"<nav aria-label=\"Pages\" class=\"row\">{''.join(pages)}</nav>" if pages else ""
    return page(f"Config revisions of {slug}", (
        f"<p><a href=\"/apps/{attr(slug)}\">← {escape(slug)}</a></p>"
        f"<h1>Config revisions</h1>{body}{more}"), nav=nav)


def _empty(slug: str) -> str:
    s = escape(slug)
    return (f"<p>No config revisions of {s} yet.</p><p>Declare the app, its products and "
            "its webhook in <code>svc.config.json</code> (schema <code>svc.config.v1</code>), "
            "preview the change with <code>svc config plan</code>, then run <code>svc config "
            "apply</code>. Each apply that changes something is recorded here as a revision "
            "you can read and roll back to.</p>")


def _row(base: str, r: View, numbers: dict[str, int]) -> str:
    target = r["rollbackOf"]
    rollback = _revision_link(base, target, numbers.get(target)) if target else "—"
    withheld = ("<br><span class=\"hint\">Secrets withheld: cannot be rolled back to</span>"
                if r["withheldPaths"] else "")
    return (f"<tr><td><a href=\"{base}/{attr(r['id'])}\">#{r['number']}</a><br>"
            f"<code class=\"hint\">{escape(r['id'])}</code>{withheld}</td>"
            f"<td>{_time(r['createdAt'])}</td><td>{_who(r)}</td>"
            f"<td>{escape(r['mode'])}</td><td>{escape(_summary(r['summary']))}</td>"
            f"<td>{rollback}</td></tr>")


def revision_page(nav: Nav, shown: RevisionShown) -> HTMLResponse:
    r, slug = shown.revision, shown.app
    base = f"/apps/{attr(slug)}/config"
    target = r["rollbackOf"]
    rows = (("Id", f"<code>{escape(r['id'])}</code>"),
            ("Applied", _time(r["createdAt"])), ("By", _who(r)),
            ("Mode", escape(MODES.get(r["mode"]) or str(r["mode"]))),
            ("Changes", escape(_summary(r["summary"]))),
            ("Rollback of", _revision_link(base, target, shown.rollback_number)
             if target else "—"))
    details = "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"
    config = json.dumps(r["config"], indent=2, ensure_ascii=False)
    return page(f"Config revision #{r['number']} of {slug}", (
        f"<p><a href=\"{base}\">← config revisions of {escape(slug)}</a></p>"
        f"<h1>Config revision #{r['number']}</h1>{details}"
        f"{_withheld(r['state'] is None, r['withheldPaths'])}"
        f"<section aria-labelledby=\"ops-h\"><h2 id=\"ops-h\">What it changed</h2>"
        f"{_ops(r['ops'])}</section>"
        "<section aria-labelledby=\"config-h\"><h2 id=\"config-h\">Config as applied</h2>"
        "<p class=\"hint\">The document as it was sent; fields it leaves out were left as "
        f"they were.</p><pre><code>{escape(config)}</code></pre></section>"
        f"{_state(r['state'], r['id'], r['withheldPaths'])}"), nav=nav)


def _state(state: View | None, revision_id: str, withheld: list[str]) -> str:
    """The state the revision left, which a rollback to it restores; or why there is none
    and what a rollback to it does instead; or, when secrets were withheld from what it
    would restore, why it cannot be rolled back to."""
    rollback = (f"<code>svc config rollback {escape(revision_id)}</code> (<code>POST "
                "/api/developer/config/rollback</code>)")
    if withheld and state is None:
        text = ("<p>Not recorded: this revision was applied before revisions kept the state "
                "they left, or a value in it then looked like a secret. It cannot be rolled "
                "back to (see the note above).</p>")
    elif withheld:
        shown = json.dumps(state, indent=2, ensure_ascii=False)
        text = ("<p class=\"hint\">Every field config manages, as this revision left it, "
                "its secrets withheld: it cannot be rolled back to (see the note above).</p>"
                f"<pre><code>{escape(shown)}</code></pre>")
    elif state is None:
        text = ("<p>Not recorded: this revision was applied before revisions kept the state "
                "they left, or a value in it then looked like a secret. Rolling back to it "
                f"({rollback}) applies the config above again, in its mode: fields and "
                "resources it leaves out keep the values they have then.</p>")
    else:
        shown = json.dumps(state, indent=2, ensure_ascii=False)
        text = (f"<p class=\"hint\">Every field config manages, as this revision left it. "
                f"Rolling back to it ({rollback}) restores this, as a new revision: products "
                "and a webhook endpoint it does not list are disabled (mirror mode).</p>"
                f"<pre><code>{escape(shown)}</code></pre>")
    return ("<section aria-labelledby=\"state-h\"><h2 id=\"state-h\">State it left</h2>"
            f"{text}</section>")


def _withheld(without_state: bool, paths: list[str]) -> str:
    """Why a revision whose secrets were withheld cannot be rolled back to, up front: the
    service refuses it (``config_revision_withheld``), so the page offers no rollback.
    Nothing when ``paths`` is empty."""
    if not paths:
        return ""
    restored = ("its config as sent (it recorded no state)" if without_state
                else "the state it left")
    places = "".join(f"<li><code>{escape(path)}</code></li>" for path in paths)
    return ("<div class=\"alert\" role=\"note\"><p><strong>Secrets were withheld from this "
            "revision, so it cannot be rolled back to.</strong> It recorded values that look "
            "like secrets, before the secret guard refused them, and they now read "
            f"<code>{escape(WITHHELD)}</code>. A rollback would restore {restored}, writing "
            "that mark where the secrets were, so the service refuses it "
            "(<code>config_revision_withheld</code>). Withheld here:</p>"
            f"<ul>{places}</ul><p>To go back to it, apply a config with the values you want "
            "(<code>svc config apply</code>), keeping credentials in your deployment's "
            "environment.</p></div>")


def _ops(ops: list[View]) -> str:
    changed = [o for o in ops if o["op"] != "unchanged"]
    same = [o for o in ops if o["op"] == "unchanged"]
    rows = "".join(
        f"<tr><td>{escape(o['op'])}</td><td>{escape(o['resource'])}</td>"
        f"<td><code>{escape(o['key'])}</code></td><td>{_changes(o)}</td></tr>"
        for o in changed)
    table = ("<table><thead><tr><th scope=\"col\">Op</th><th scope=\"col\">Resource</th>"
             "<th scope=\"col\">Key</th><th scope=\"col\">Fields (before → after)</th></tr>"
             f"</thead><tbody>{rows}</tbody></table>") if changed else "<p>Nothing changed.</p>"
    if not same:
        return table
    items = "".join(f"<li>{escape(o['resource'])} <code>{escape(o['key'])}</code></li>"
                    for o in same)
    return (f"{table}<details><summary>{len(same)} unchanged</summary>"
            f"<ul>{items}</ul></details>")


def _changes(op: View) -> str:
    items = []
    for c in op["changes"]:
        if op["op"] == "create":  # nothing before: the value it was created with
            value = _value(c["after"])
        else:
            value = f"{_value(c['before'])} → {_value(c['after'])}"
        items.append(f"<li><code>{escape(c['field'])}</code>: {value}</li>")
    return f"<ul class=\"changes\">{''.join(items)}</ul>" if items else ""


def _value(value: Any) -> str:
    if value is None:
        return "<span class=\"hint\">none</span>"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"<code>{escape(text)}</code>"


def _summary(summary: dict[str, int]) -> str:
    parts = [f"{summary[k]} {word}" for k, word in SUMMARY_WORDS if summary.get(k)]
    return " · ".join(parts) or "nothing"


def _who(r: View) -> str:
    by = r["appliedBy"]
    name = escape(by["username"] or by["developerId"])
    return f"{name} <span class=\"hint\">({'CLI' if r['via'] == 'cli' else 'console'})</span>"


def _revision_link(base: str, revision_id: str, number: int | None) -> str:
    label = f"#{number}" if number is not None else escape(revision_id)
    return f"<a href=\"{base}/{attr(revision_id)}\">{label}</a>"


def _time(iso: str) -> str:
    moment = datetime.fromisoformat(iso)
    moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return f"<time datetime=\"{attr(iso)}\">{moment:%Y-%m-%d %H:%M:%S} UTC</time>"
