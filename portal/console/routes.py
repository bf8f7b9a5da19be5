"""The console host's pages; the JSON developer API is mounted beside them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from payments.developer.services import DeveloperServices
from payments.webhooks.services import WebhookServices
from portal.console.account import AccountPages
from portal.console.apps import AppPages
from portal.console.cli import CliPages
from portal.console.context import Console, RuntimeUrl
from portal.console.org_keys import OrganizationKeyPages
from portal.console.revisions import RevisionPages
from portal.console.runtime import RuntimePage
from portal.console.webhooks import WebhookPages


async def home(request: Request) -> Response:
    return RedirectResponse("/apps", status_code=303)


async def to_key_list(request: Request) -> Response:
    """A form's target opened as a page (back, reload, a bookmark of the secret page): the
    list it came from, never a 405; the secret is not shown again."""
    app = request.path_params.get("app")
    return RedirectResponse(f"/apps/{app}#keys" if app else "/keys#keys", status_code=303)


def console_routes(services: DeveloperServices, runtime_url: RuntimeUrl,
                   webhook_services: WebhookServices) -> list[Route]:
    console = Console(services, runtime_url)
    account, apps, cli = AccountPages(console), AppPages(console), CliPages(console)
    revisions, org_keys = RevisionPages(console), OrganizationKeyPages(console)
    hooks = WebhookPages(console, webhook_services)
    get, post = ["GET", "HEAD"], ["POST"]
    return [
        Route("/", home, methods=get),
        Route("/signup", account.signup_form, methods=get),
        Route("/signup", account.signup, methods=post),
        Route("/verify", account.verify_form, methods=get),
        Route("/verify", account.verify, methods=post),
        Route("/verify/resend", account.resend, methods=post),
        Route("/login", account.login_form, methods=get),
        Route("/login", account.login, methods=post),
        Route("/logout", account.logout, methods=post),
        Route("/apps", apps.list, methods=get),
        Route("/apps/new", apps.new_form, methods=get),
        Route("/apps/new", apps.create, methods=post),
        Route("/apps/{app}", apps.show, methods=get),
        Route("/apps/{app}/pay-to", apps.set_pay_to, methods=post),
        Route("/apps/{app}/products", apps.add_product, methods=post),
        Route("/apps/{app}/products/{product}", apps.update_product, methods=post),
        Route("/apps/{app}/keys", apps.create_key, methods=post),
        Route("/apps/{app}/keys", to_key_list, methods=get),
        Route("/apps/{app}/keys/{key}/revoke", apps.revoke_key, methods=post),
        Route("/apps/{app}/webhooks", hooks.show, methods=get),
        Route("/apps/{app}/webhooks", hooks.create, methods=post),
        Route("/apps/{app}/webhooks/{webhook}", hooks.update, methods=post),
        Route("/apps/{app}/webhooks/{webhook}/rotate", hooks.rotate, methods=post),
        Route("/apps/{app}/webhooks/{webhook}/test", hooks.test, methods=post),
        Route("/apps/{app}/webhooks/{webhook}/resend-skipped", hooks.resend_skipped,
              methods=post),
        Route("/apps/{app}/webhook-attempts/{attempt}/retry", hooks.retry, methods=post),
        *(Route(path, hooks.to_page, methods=get) for path in (
            "/apps/{app}/webhooks/{webhook}", "/apps/{app}/webhooks/{webhook}/rotate",
            "/apps/{app}/webhooks/{webhook}/test", "/apps/{app}/webhooks/{webhook}/resend-skipped",
            "/apps/{app}/webhook-attempts/{attempt}/retry")),
        Route("/apps/{app}/runtime", RuntimePage(console).show, methods=get),
        Route("/apps/{app}/config", revisions.list, methods=get),
        Route("/apps/{app}/config/{revision}", revisions.show, methods=get),
        Route("/keys", org_keys.show, methods=get),
        Route("/keys/new", org_keys.create, methods=post),
        Route("/keys/new", to_key_list, methods=get),
        Route("/keys/{key}/revoke", org_keys.revoke, methods=post),
        Route("/device", cli.device, methods=get),
        Route("/cli/approve", cli.approve_form, methods=get),
        Route("/cli/approve", cli.approve, methods=post),
    ]
