"""OpenAPI paths and schemas of the configuration API (spec 4.8)."""

from __future__ import annotations

from typing import Any

from manifest.rules import PAYMENT_SUBMITTED_PATH, WEBHOOK_PATH
from payments.schemas import CONFIG, load_schema

GRANT: list[dict[str, list[str]]] = [{"cliGrant": []}, {"consoleSession": []}]
ERR = {"$ref": "#/components/responses/Error"}
STR = {"type": "string"}
NSTR = {"type": ["string", "null"]}
REV = {"type": "string", "pattern": "^zcfgrev_[0-9a-f]{30}$"}
NREV = {"anyOf": [REV, {"type": "null"}]}
# What a CLI grant needs (spec 5.3's scopes; payments.config.api).
READ = "the scope `apps:read`"
WRITE = ("the scope `apps:read`, and the write scope of each kind of change the plan makes: "
         "`apps:write` (app fields, payTo included), `products:write`, `webhooks:write`, "
         "`runtime:write`; a grant lacking one gets 403 `developer_cli_scope_missing` naming "
         "it, before anything is written")


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


PROBLEM = _obj(["path", "code", "message"], path=STR, code=STR, message=STR)
OP = _obj(["op", "resource", "key", "id", "changes"],
          op={"enum": ["create", "update", "disable", "unchanged"]},
          resource={"enum": ["app", "runtime", "product", "webhook"]}, key=STR, id=NSTR,
          changes={"type": "array", "items": _obj(["field", "before", "after"], field=STR,
                                                  before={}, after={})})
SUMMARY = _obj(["create", "update", "disable", "unchanged"],
               **{k: {"type": "integer", "minimum": 0}
                  for k in ("create", "update", "disable", "unchanged")})
WARNING = _obj(["code", "key", "message"], code=STR, key=STR, message=STR,
               # webhook_skipped_while_disabled's count, as the webhook API's answers say it
               skippedWhileDisabled={"type": "integer", "minimum": 1})
REVISION = _obj(
    ["id", "number", "appId", "mode", "summary", "appliedBy", "via", "rollbackOf",
     "createdAt", "withheldPaths"], id=REV, number={"type": "integer", "minimum": 1}, appId=STR,
    mode={"enum": ["merge", "mirror"]}, summary=SUMMARY,
    appliedBy=_obj(["developerId", "username"], developerId=STR, username=NSTR),
    via={"enum": ["cli", "console"]}, rollbackOf=NREV, createdAt={"type": "string",
                                                                  "format": "date-time"},
    withheldPaths={"type": "array", "items": STR, "description": (
        "JSON paths, in what a rollback to this revision would restore (its state; without "
        "one, its config as sent), of secrets withheld from it since it was recorded "
        "(migrations 0018 and 0021); a rollback to a revision listing any is refused, 422 "
        "`config_revision_withheld`")})


def _schema() -> dict[str, Any]:
    schema = load_schema(CONFIG)
    schema.pop("$schema", None)
    return schema


COMPONENT_SCHEMAS: dict[str, Any] = {
    "SvcConfig": _schema(),
    "ConfigOp": OP,
    "ConfigRevision": REVISION,
    "ConfigPlan": _obj(
        ["app", "mode", "baseRevision", "digest", "ops", "summary", "errors", "warnings",
         "missingSecrets", "runtimeValidation"],
        app=STR, mode={"enum": ["merge", "mirror"]}, baseRevision=NREV, digest=STR,
        ops={"type": "array", "items": _ref("ConfigOp")}, summary=SUMMARY,
        errors={"type": "array", "items": PROBLEM}, warnings={"type": "array", "items": WARNING},
        missingSecrets={"type": "array", "items": _obj(["name", "status", "message"],
                                                       name=STR, status=STR, message=STR)},
        runtimeValidation={"anyOf": [{"type": "null"}, _obj(
            ["origin", "manifestUrl", "appPath", "expected", "returnUrl"], origin=STR,
            manifestUrl=STR, appPath=STR, returnUrl=STR,
            expected=_obj(["appId", "appSlug", "payTo", "webhookPath", "paymentSubmittedPath",
                           "entryPath"], appId=NSTR, appSlug=STR, payTo=NSTR,
                          webhookPath={"const": WEBHOOK_PATH},
                          paymentSubmittedPath={"const": PAYMENT_SUBMITTED_PATH},
                          entryPath=STR))]}),
    "ConfigApplied": _obj(
        ["app", "mode", "ops", "summary", "ids", "warnings", "revision"],
        app=STR, mode={"enum": ["merge", "mirror"]},
        ops={"type": "array", "items": _ref("ConfigOp")}, summary=SUMMARY,
        ids=_obj(["app", "products", "webhook", "revision"], app=STR,
                 products={"type": "object", "additionalProperties": STR}, webhook=NSTR,
                 revision=NREV),
        warnings={"type": "array", "items": WARNING},
        revision={"anyOf": [{"type": "null"}, _ref("ConfigRevision")]},
        secrets=_obj([], webhookSigningSecret={"type": "string", "pattern": "^zwhsec_"})),
}


def _op(summary: str, scope: str, schema: str | None, *, status: str = "200",
        body: dict[str, Any] | None = None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    responses: dict[str, Any] = {status: {"description": "success"}}
    if schema is not None:
        responses[status]["content"] = {"application/json": {"schema": _ref(schema)}}
    for code in ("400", "401", "403", "404", "409", "413", "415", "422", "429", *extra):
        responses[code] = ERR
    op: dict[str, Any] = {"summary": summary, "description": f"{summary} CLI grants need "
                          f"{scope} for the config's app.", "security": GRANT,
                          "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": body}}}
    return op


def config_paths() -> dict[str, Any]:
    p = "/api/developer/config"
    request = {"type": "object", "required": ["config"], "properties": {
        "config": _ref("SvcConfig"), "mode": {"enum": ["merge", "mirror"]},
        "baseRevision": NREV, "planDigest": STR}}
    plan_request = {"oneOf": [request, {
        "type": "object", "required": ["revision"], "additionalProperties": False,
        "description": "the plan of a rollback to this revision, exactly as POST "
                       "/api/developer/config/rollback will make it (send its baseRevision "
                       "and digest with the rollback)",
        "properties": {"revision": REV}}]}
    applied = _op("Apply a config in one transaction; records a revision when anything "
                  "changed (201), else 200 with no revision. A new webhook's signing secret "
                  "is in `secrets`, this once.", WRITE, "ConfigApplied",
                  status="201", body={**request, "required": ["config", "baseRevision"]},
                  extra=("503",))
    applied["responses"]["200"] = {"description": "nothing to change", "content": {
        "application/json": {"schema": _ref("ConfigApplied")}}}
    rollback = _op("Restore the app as an earlier revision left it (its recorded state, in "
                   "mirror mode: the products, webhook endpoint and runtime it does not list "
                   "are disabled, never deleted), as a new revision; a "
                   "revision recorded before states were kept has its config re-applied as "
                   "sent, in its mode, with a warning (rollback_without_state); one whose "
                   "credentials in URLs were withheld (migration 0018) is refused, 422 "
                   "config_revision_withheld. Plan it first with POST "
                   "/api/developer/config/plan {revision}.", WRITE,
                   "ConfigApplied", status="201", body={
                       "type": "object", "required": ["revision", "baseRevision"],
                       "properties": {"revision": REV, "baseRevision": NREV,
                                      "planDigest": STR}}, extra=("503",))
    rollback["responses"]["200"] = applied["responses"]["200"]
    return {
        f"{p}/plan": {"post": _op("Preview a config, or a rollback to a revision: ops, "
                                  "blocking errors, warnings, missing secrets, runtime "
                                  "validation inputs. Writes nothing.",
                                  READ, "ConfigPlan", body=plan_request, extra=("503",))},
        f"{p}/apply": {"post": applied},
        f"{p}/revisions": {"get": {
            **_op("An app's config revisions, newest first, a page at a time.", READ,
                  None),
            "parameters": [
                {"name": "app", "in": "query", "required": True, "schema": STR,
                 "description": "app id (zapp_...) or slug"},
                {"name": "limit", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}},
                {"name": "before", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                 "description": "list revisions numbered below this one: the previous "
                                "page's nextBefore; ASCII digits, leading zeros allowed"}],
            "responses": {"200": {"description": "success", "content": {"application/json": {
                "schema": _obj(["app", "revisions", "nextBefore"], app=STR, revisions={
                    "type": "array", "items": _ref("ConfigRevision")},
                    nextBefore={"type": ["integer", "null"],
                                "description": "the before of the next, older page; null "
                                               "on the last page"})}}},
                "401": ERR, "403": ERR, "404": ERR, "422": ERR}}},
        f"{p}/revisions/{{revision}}": {"get": {
            **_op("One revision: the config as applied (as sent), the state it left and its "
                  "ops.", READ, None),
            "parameters": [{"name": "revision", "in": "path", "required": True,
                            "schema": STR}],
            "responses": {"200": {"description": "success", "content": {"application/json": {
                "schema": _obj(["revision"], revision=_obj(
                    [*REVISION["required"], "config", "state", "ops"],
                    **REVISION["properties"], config={"type": "object"},
                    state={"anyOf": [_ref("SvcConfig"), {"type": "null"}],
                           "description": "the app as this revision left it: every field "
                                          "config manages, each active product in full, the "
                                          "enabled webhook endpoint; what a rollback to it "
                                          "restores. null: recorded before revisions kept "
                                          "it, or not recordable (a value set outside config "
                                          "looked like a secret)"},
                    ops={"type": "array", "items": _ref("ConfigOp")}))}}},
                "401": ERR, "403": ERR, "404": ERR}}},
        f"{p}/rollback": {"post": rollback},
    }
