"""The shared URL policy: webhook URLs and runtime origins (spec 5.5, 4.11, 8 item 8).

Name resolution is tested with a fake resolver here: the answers of public DNS are the
edge of the world. tests/webhooks and tests/runtime run a real DNS server on loopback.
"""

from __future__ import annotations

import ipaddress

import pytest

from manifest.addresses import IPAddress
from manifest.url_policy import (
    CheckedUrl,
    UrlPolicy,
    UrlRefused,
    check_entry_url,
    check_runtime_origin,
    check_webhook_url,
    resolve_checked,
)
from router.settings import load_settings

PROD = UrlPolicy(service_hosts=frozenset({"api.pay.example.com", "portal.pay.example.com",
                                          "console.pay.example.com", "docs.pay.example.com"}),
                 apps_domain="apps.pay.example.com", allow_loopback=False)
DEV = UrlPolicy(service_hosts=PROD.service_hosts, apps_domain=PROD.apps_domain,
                allow_loopback=True)


def webhook(url: str, policy: UrlPolicy = PROD, *, active: bool = True) -> CheckedUrl:
    return check_webhook_url(url, policy, app_slug="space-game", runtime_active=active)


REFUSED_WEBHOOKS = [
    ("http://hooks.dev.example.org/hook", "https_required"),
    ("ftp://hooks.dev.example.org/hook", "https_required"),
    ("javascript:alert(1)", "https_required"),
    ("https://user:pw@hooks.dev.example.org/hook", "userinfo"),
    ("https://hooks.dev.example.org@10.0.0.1/hook", "userinfo"),
    ("https://hooks.dev.example.org/hook#frag", "malformed"),
    ("https://hooks.dev.example.org/ho ok", "malformed"),
    ("https://hooks.dev.example.org\\@evil/hook", "malformed"),
    ("https:///hook", "malformed"),
    ("https://hooks.dev.example.org:0/hook", "malformed"),
    ("https://hooks.dev.example.org:99999/hook", "malformed"),
    ("https://-bad-.example.org/hook", "malformed"),
    ("https://localhost/hook", "internal_name"),
    ("https://LOCALHOST./hook", "internal_name"),
    ("https://api.localhost/hook", "internal_name"),
    ("https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/hook", "internal_name"),
    ("https://printer.local/hook", "internal_name"),
    ("https://metadata.google.internal/computeMetadata/v1/", "internal_name"),
    ("https://ip-10-0-0-1.ec2.internal/hook", "internal_name"),
    ("https://router.home.arpa/hook", "internal_name"),
    ("https://box.lan/hook", "internal_name"),
    ("https://fileserver/hook", "single_label"),
    ("https://metadata/hook", "single_label"),
    ("https://127.0.0.1/hook", "private_address"),
    ("https://10.1.2.3/hook", "private_address"),
    ("https://172.16.0.1/hook", "private_address"),
    ("https://192.168.1.1/hook", "private_address"),
    ("https://100.64.0.1/hook", "private_address"),
    ("https://169.254.169.254/latest/meta-data/", "private_address"),
    ("https://0.0.0.0/hook", "private_address"),
    ("https://255.255.255.255/hook", "private_address"),
    ("https://224.0.0.1/hook", "private_address"),
    ("https://[::1]/hook", "private_address"),
    ("https://[::ffff:127.0.0.1]/hook", "private_address"),
    ("https://[::ffff:a9fe:a9fe]/hook", "private_address"),
    ("https://[fe80::1]/hook", "private_address"),
    ("https://[fd00::1]/hook", "private_address"),
    ("https://[64:ff9b::a00:1]/hook", "private_address"),
    ("https://[2002:a00:1::]/hook", "private_address"),
    ("https://[fe80::1%25eth0]/hook", "ip_spelling"),
    ("https://2130706433/hook", "ip_spelling"),
    ("https://0x7f000001/hook", "ip_spelling"),
    ("https://0177.0.0.1/hook", "ip_spelling"),
    ("https://0x7f.0.0.1/hook", "ip_spelling"),
    ("https://127.1/hook", "ip_spelling"),
    ("https://8.8.8.010/hook", "ip_spelling"),
    ("https://1.2.3.4.5/hook", "ip_spelling"),
    ("https://\uff11\uff12\uff17.0.0.1/hook", "private_address"),
    ("https://api.pay.example.com/hook", "service_host"),
    ("https://portal.pay.example.com/api/svc/webhook", "service_host"),
    ("https://apps.pay.example.com/api/svc/webhook", "service_host"),
    ("https://other-game.apps.pay.example.com/api/svc/webhook", "other_app_host"),
    ("https://space-game.apps.pay.example.com/api/svc/other", "apps_proxy_path"),
    ("https://space-game.apps.pay.example.com/api/svc/webhook?x=1", "apps_proxy_path"),
    ("https://space-game.apps.pay.example.com/api/svc/webhook/", "apps_proxy_path"),
]


@pytest.mark.parametrize(("url", "rule"), REFUSED_WEBHOOKS)
def test_webhook_urls_refused(url: str, rule: str) -> None:
    with pytest.raises(UrlRefused) as info:
        webhook(url)
    assert (info.value.code, info.value.rule) == ("webhook_url_invalid", rule), info.value.message


def test_corpus_is_large_and_covers_every_rule() -> None:
    assert len(REFUSED_WEBHOOKS) >= 50
    assert {r for _, r in REFUSED_WEBHOOKS} >= {
        "https_required", "userinfo", "malformed", "internal_name", "single_label",
        "private_address", "ip_spelling", "service_host", "other_app_host", "apps_proxy_path"}


def test_public_https_webhook_accepted() -> None:
    checked = webhook("https://Hooks.Dev.Example.org:8443/svc/hook?v=2")
    assert (checked.host, checked.port, checked.path) == ("hooks.dev.example.org", 8443,
                                                          "/svc/hook?v=2")
    assert checked.host_header == "hooks.dev.example.org:8443"
    assert webhook("https://8.8.8.8/hook").ip_literal


def test_apps_proxy_webhook_only_for_own_active_runtime() -> None:
    url = "https://space-game.apps.pay.example.com/api/svc/webhook"
    assert webhook(url).apps_proxy_slug == "space-game"
    with pytest.raises(UrlRefused) as info:
        webhook(url, active=False)
    assert info.value.rule == "runtime_not_active"


def test_dev_switch_admits_local_receivers_but_never_metadata() -> None:
    assert webhook("http://127.0.0.1:9000/hook", DEV).port == 9000
    assert webhook("http://localhost:9000/hook", DEV).host == "localhost"
    assert webhook("http://192.168.1.20/hook", DEV).ip_literal
    for url in ("http://169.254.169.254/", "http://0.0.0.0:80/", "http://[fe80::1]/",
                "http://100.64.0.1/"):
        with pytest.raises(UrlRefused):
            webhook(url, DEV)
    with pytest.raises(UrlRefused) as info:  # plain http to a public server: still refused
        webhook("http://hooks.dev.example.org/hook", DEV)
    assert info.value.rule == "https_required"


class FixedResolver:
    def __init__(self, *answers: str) -> None:
        self.answers: list[IPAddress] = [ipaddress.ip_address(a) for a in answers]
        self.asked: list[str] = []

    def resolve(self, host: str) -> list[IPAddress]:
        self.asked.append(host)
        return self.answers


def test_resolution_refuses_any_private_answer() -> None:
    checked = webhook("https://hooks.dev.example.org/hook")
    assert resolve_checked(checked, PROD, FixedResolver("93.184.215.14")) == [
        ipaddress.ip_address("93.184.215.14")]
    for answers in (("10.0.0.5",), ("93.184.215.14", "127.0.0.1"), ("::ffff:10.0.0.1",),
                    ("169.254.169.254",)):
        with pytest.raises(UrlRefused) as info:
            resolve_checked(checked, PROD, FixedResolver(*answers))
        assert (info.value.code, info.value.rule) == ("webhook_url_invalid", "resolves_private")


def test_literals_and_dev_localhost_need_no_lookup() -> None:
    resolver = FixedResolver("10.0.0.1")
    assert resolve_checked(webhook("https://8.8.4.4/h"), PROD, resolver) == [
        ipaddress.ip_address("8.8.4.4")]
    assert resolve_checked(webhook("http://localhost:9/h", DEV), DEV, resolver) == [
        ipaddress.ip_address("127.0.0.1")]
    assert resolver.asked == []


@pytest.mark.parametrize(("origin", "rule"), [
    ("http://game.dev.example.org", "https_required"),
    ("https://game.dev.example.org/app", "not_an_origin"),
    ("https://game.dev.example.org?x=1", "not_an_origin"),
    ("https://space-game.apps.pay.example.com", "apps_domain"),
    ("https://apps.pay.example.com", "apps_domain"),
    ("https://api.pay.example.com", "service_host"),
    ("https://localhost:8443", "internal_name"),
    ("https://10.0.0.2", "private_address"),
    ("https://2130706433", "ip_spelling"),
])
def test_runtime_origins_refused(origin: str, rule: str) -> None:
    with pytest.raises(UrlRefused) as info:
        check_runtime_origin(origin, PROD)
    assert (info.value.code, info.value.rule) == ("runtime_origin_invalid", rule)


def test_the_legacy_launch_host_is_a_service_host() -> None:
    """Spec 5.5 refuses service-owned hosts as webhook endpoints (and 8 item 8 as runtime
    origins); the retired launch host (spec 1.1) is one, though no URL setting names it."""
    settings = load_settings({
        "SVCSRV_MODE": "production", "SVCSRV_BASE_URL": "https://api.svcpay.io",
        "SVCSRV_PORTAL_URL": "https://svcpay.io", "SVCSRV_CONSOLE_URL": "https://console.svcpay.io",
        "SVCSRV_DOCS_URL": "https://docs.svcpay.io", "SVCSRV_APPS_DOMAIN": "apps.svcpay.io",
        "SVCSRV_APPS_SCHEME": "https", "SVCSRV_SMTP_HOST": "smtp.svcpay.io",
        "SVCSRV_SECRET_KEY": "x" * 40, "SVCSRV_LEGACY_LAUNCH_HOST": "launch.svcpay.io",
        "SVCSRV_DATABASE_URL": "postgresql://svc@db.svcpay.io/svc"})
    policy = UrlPolicy.from_settings(settings)
    for url in ("https://launch.svcpay.io/api/svc/webhook", "https://LAUNCH.svcpay.io./hook"):
        with pytest.raises(UrlRefused) as webhook_info:
            webhook(url, policy)
        assert (webhook_info.value.code, webhook_info.value.rule) == ("webhook_url_invalid",
                                                                      "service_host")
    with pytest.raises(UrlRefused) as origin_info:
        check_runtime_origin("https://launch.svcpay.io", policy)
    assert (origin_info.value.code, origin_info.value.rule) == ("runtime_origin_invalid",
                                                                "service_host")
    # The control: a developer's own host under another name is still accepted.
    assert webhook("https://hooks.launch-games.io/hook", policy).host == "hooks.launch-games.io"
    assert check_runtime_origin("https://launch.games.io", policy).host == "launch.games.io"


def test_runtime_origins_accepted() -> None:
    assert check_runtime_origin("https://game.dev.example.org/", PROD).port == 443
    assert check_runtime_origin("https://game.dev.example.org:8443", PROD).port == 8443
    # spec 4.11 local dev: http://127.0.0.1:<port> or http://localhost:<port>
    assert check_runtime_origin("http://127.0.0.1:5173", DEV).ip_literal
    assert check_runtime_origin("http://localhost:5173", DEV).host == "localhost"
    with pytest.raises(UrlRefused):
        check_runtime_origin("http://127.0.0.1:5173", PROD)


@pytest.mark.parametrize(("url", "rule"), [
    ("javascript:alert(1)", "https_required"),
    ("data:text/html,hi", "https_required"),
    ("game.example.com/play", "https_required"),  # not absolute
    ("//game.example.com/play", "https_required"),
    ("http://game.example.com/play", "https_required"),  # http only in dev, and local
    ("https://user:pw@game.example.com/", "userinfo"),
    ("https://localhost:5173/space-game", "internal_name"),
    ("https://10.0.0.8/", "private_address"),
    ("https://portal.pay.example.com/space-game", "service_host"),
    ("https://other.apps.pay.example.com/", "other_app_host"),
    ("https://game.example.com/a b", "malformed"),
])
def test_entry_urls_are_the_developers_own_public_https(url: str, rule: str) -> None:
    with pytest.raises(UrlRefused) as refused:
        check_entry_url(url, PROD, app_slug="space-game")
    assert (refused.value.code, refused.value.rule) == ("entry_url_invalid", rule)


def test_entry_urls_accepted() -> None:
    for url in ("https://game.example.com/play?from=portal", "https://space-game.apps.pay."
                "example.com/", " https://game.example.com "):
        assert check_entry_url(url, PROD, app_slug="space-game").url == url.strip()
    # dev: the developer's own machine, over plain http
    assert check_entry_url("http://localhost:5173/play", DEV, app_slug="space-game").port == 5173
    with pytest.raises(UrlRefused):
        check_entry_url("http://game.example.com/", DEV, app_slug="space-game")
