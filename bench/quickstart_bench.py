"""Worker Quick Launch from zero, timed: an empty database to a settled charge on the
developer's own runtime, through the public API, the console's forms and the CLI only.

    python bench/quickstart_bench.py [--rounds 3] [--no-write]

Each round starts ``svc-server dev`` in a fresh directory (an empty SQLite database), then
times what a developer and an operator do:

1. sign up: the console's sign-up form, the verification code ``svc-server dev`` prints,
   the new-app form (name and ``pay_to``);
2. sign in the CLI: ``svc auth device``, approved on the console's approval form;
3. configure: ``svc init`` (the reference app, ``svc.config.json``, ``svc.toml``, ``.env``),
   ``svc config apply`` (products, the webhook on loopback, the runtime origin; the signing
   secret is shown once), ``svc keys create`` (the ``zpk_`` key, once), both secrets into
   ``.env``, and the copied app started with it (``python -m reference_app``);
4. verify the runtime: ``svc runtime verify`` and ``svc runtime request-domain``;
5. approve (operator): ``svc-ops review approve``, ``svc-ops domain approve`` (the DNS
   check is skipped, dev only: ``*.localhost`` is in no DNS) and ``svc-ops allowlist add``;
   done when the router serves the runtime;
6. pay: the user's wallet signs the permit the portal asks for (eth-account: the edge of
   the world, see below), the portal's return-code call, the summary exchanged from the
   runtime's origin for a payment code, the product route; done when the signed
   ``payment.delivered`` webhook has granted the item in the app's inventory;
7. settle: until the in-process chain settled the charge, the app received
   ``payment.settled`` and ``pay_to``'s USDC balance grew by the price.

The signature is made by eth-account over the exact typed data the portal serves
(``/api/portal/permit``) rather than by Chromium with the dev wallet: the flow then
measures the service and the CLI, not a browser's start-up (a second or more on this
machine) or page rendering; the browser path of the same flow is tested by the reference
app's Playwright tests. ``svc-server dev`` runs its webhook and chain workers in-process,
with its 5 s settlement batch age, which bounds step 7 from below.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
SVC, SVC_OPS, SVC_SERVER = (str(BIN / name) for name in ("svc", "svc-ops", "svc-server"))
CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')
CODE_RE = re.compile(r"Your verification code is (\d{6})")
# Hardhat's fourth default account: a dev recipient no seeded app uses.
PAY_TO = "0x90F79bf6EB2c4f870365E51bd2Fb0b1d6C6a9dD3"
PASSWORD = "correct horse battery staple"  # noqa: S105  (a throwaway dev account)
PRODUCT = "retry"
GRANT_SCOPES = "apps:read,apps:write,products:write,webhooks:write,runtime:write,keys:create"
KEY_SCOPES = ("orders:create,orders:read,receipts:read,deliveries:read,charges:create,"
              "connections:create,connections:read")
BUDGET_ATOMIC = 1_000_000  # the user's budget: 1 USDC
STEPS = ("sign up", "sign in the CLI", "configure", "verify the runtime",
         "approve (operator)", "pay", "settle")
TARGET_SECONDS = 60.0


class StepFailed(RuntimeError):
    """A step did not reach its outcome; the message says which and what was seen."""


@dataclass
class Result:
    start_seconds: float  # svc-server dev on an empty database, until it answers
    steps: dict[str, float] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.steps.values())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(what: str, check: Callable[[], Any], timeout: float,
               interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (httpx.TransportError, StepFailed) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise StepFailed(f"{what}: not within {timeout:.0f} s (last seen: {last!r})")


@dataclass
class Process:
    """A child process whose combined output is collected by a thread."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @classmethod
    def start(cls, args: list[str], cwd: Path, env: dict[str, str]) -> Process:
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        started = cls(proc)
        started.reader = threading.Thread(target=started._pump, daemon=True)
        started.reader.start()
        return started

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.reader is not None:
            self.reader.join(timeout=5)  # the output up to the end is read
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def answers(process: Process, probe: Callable[[], httpx.Response]) -> bool:
    """``probe`` answered 200; a process that exited stops the wait with its output."""
    if not process.alive():
        raise RuntimeError("a process exited:\n" + process.output()[-3000:])
    return probe().status_code == 200


def clean_env() -> dict[str, str]:
    """This environment without the server's or a runtime's own variables; the children
    import this checkout's code (an editable install may point at another)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SVCSRV_", "SVC_")) and k not in ("DATABASE_URL", "BROWSER")}
    return {**env, "PYTHONPATH": str(REPO)}


class Quickstart:
    """One run, from an empty database; its directories live under ``root``."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.app_port = free_port()
        self.server_dir, self.project = root / "server", root / "game"
        self.server_dir.mkdir(parents=True)
        self.cli_env = {**clean_env(), "SVC_CONFIG_DIR": str(root / "cli-config")}
        self.api_url = f"http://api.localhost:{self.port}"
        self.portal_url = f"http://portal.localhost:{self.port}"
        self.origin = f"http://127.0.0.1:{self.app_port}"
        self.email = "dev@example.com"
        self.username = "quickdev"
        self.slug = ""
        self.server: Process | None = None
        self.app: Process | None = None
        self.secrets: dict[str, str] = {}
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30,
                                 follow_redirects=False)
        # A browser on the console: its own cookie jar.
        self.browser = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30,
                                    follow_redirects=False, headers=self.host("console"))
        self.token = self.user_id = self.delivery_id = self.wallet = ""
        self.balance_before = self.balance_after = 0

    # -- plumbing ---------------------------------------------------------------------------

    def host(self, name: str) -> dict[str, str]:
        return {"host": f"{name}.localhost:{self.port}"}

    @property
    def runtime_host(self) -> str:
        return f"{self.slug}.apps.localhost:{self.port}"

    def svc(self, *args: str, cwd: Path | None = None) -> dict[str, Any]:
        """``svc ... --json``; the last line of its output, which must say it succeeded."""
        done = subprocess.run([SVC, *args, "--api-url", self.api_url, "--json"],
                              cwd=cwd or self.project, env=self.cli_env, text=True,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=120,
                              check=False)
        if done.returncode != 0:
            raise StepFailed(f"svc {' '.join(args)} exited {done.returncode}: "
                             f"{self.mask(done.stdout + done.stderr)}")
        answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return answer

    def ops(self, *args: str) -> str:
        done = subprocess.run([SVC_OPS, *args, "--operator", "quickstart-bench"],
                              cwd=self.server_dir, env=clean_env(), text=True,
                              capture_output=True, timeout=120, check=False)
        if done.returncode != 0:
            raise StepFailed(f"svc-ops {' '.join(args)} exited {done.returncode}: "
                             f"{done.stdout}{done.stderr}")
        return done.stdout

    def mask(self, text: str) -> str:
        for secret in self.secrets.values():
            text = text.replace(secret, secret[:7] + "...")
        return text

    def console(self, method: str, path: str, form: dict[str, str] | None = None
                ) -> httpx.Response:
        """A browser on the console: its cookies, its Origin on posts."""
        headers = {"origin": f"http://console.localhost:{self.port}"} if method == "POST" else {}
        return self.browser.request(method, path, headers=headers, data=form)

    def console_form(self, page: str, action: str, fields: dict[str, str]) -> httpx.Response:
        shown = self.console("GET", page)
        found = CSRF_RE.search(shown.text)
        if not found:
            raise StepFailed(f"no form on {page}: {shown.status_code}")
        return self.console("POST", action, {"csrf": found.group(1), **fields})

    # -- the steps --------------------------------------------------------------------------

    def start_service(self) -> None:
        self.server = Process.start([SVC_SERVER, "dev", "--port", str(self.port)],
                                    self.server_dir, clean_env())
        server = self.server
        wait_until("svc-server dev answering", lambda: answers(server, lambda: self.http.get(
            "/healthz", headers=self.host("api"))), 60)

    def sign_up(self) -> None:
        signup = self.console_form("/signup", "/signup", {
            "email": self.email, "username": self.username, "password": PASSWORD})
        if signup.status_code != 303:
            raise StepFailed(f"sign-up: {signup.status_code} {signup.text[:300]}")
        assert self.server is not None
        server = self.server
        code = wait_until("the verification code in svc-server dev's output",
                          lambda: CODE_RE.search(server.output()), 10).group(1)
        verified = self.console_form(signup.headers["location"], "/verify",
                                     {"email": self.email, "code": code})
        if verified.status_code != 303:
            raise StepFailed(f"verify: {verified.status_code} {verified.text[:300]}")
        created = self.console_form("/apps/new", "/apps/new", {
            "name": "Quick Game", "type": "Game", "headline": "Launched from zero",
            "payTo": PAY_TO})
        if created.status_code != 303:
            raise StepFailed(f"new app: {created.status_code} {created.text[:300]}")
        self.slug = created.headers["location"].split("/")[2].split("?")[0]

    def sign_in_cli(self) -> None:
        cli = subprocess.Popen([SVC, "auth", "device", "--app", self.slug, "--scopes",
                                GRANT_SCOPES, "--ttl", "2h", "--json", "--api-url",
                                self.api_url], cwd=self.root, env=self.cli_env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert cli.stdout is not None
        pending = json.loads(cli.stdout.readline())
        code = pending["userCode"]
        approved = self.console_form(f"/cli/approve?code={code}", "/cli/approve",
                                     {"code": code, "decision": "approve"})
        if approved.status_code not in (200, 303):
            cli.kill()
            cli.communicate()
            raise StepFailed(f"approval: {approved.status_code} {approved.text[:300]}")
        out, err = cli.communicate(timeout=60)
        if cli.returncode != 0:
            raise StepFailed(f"svc auth device exited {cli.returncode}: {out} {err}")

    def configure(self) -> None:
        init = self.svc("init", str(self.project), "--app", self.slug, cwd=self.root)
        if init["source"] != "app":
            raise StepFailed(f"svc init did not read the app: {init}")
        config_file = self.project / "svc.config.json"
        document = json.loads(config_file.read_text())
        document["app"]["payTo"] = PAY_TO
        document["products"] = [
            {"slug": "retry", "sku": "retry", "name": "Retry / Continue",
             "priceAtomic": "10000", "riskMode": "optimistic"},
            {"slug": "unlock-level", "sku": "unlock-level", "name": "Unlock Level",
             "priceAtomic": "30000", "riskMode": "optimistic"}]
        document["webhooks"] = [{"url": f"{self.origin}/api/svc/webhook",
                                 "events": ["payment.delivered", "payment.settled"]}]
        document["runtime"] = {"mode": "worker_quick_launch", "origin": self.origin}
        config_file.write_text(json.dumps(document, indent=2) + "\n")
        applied = self.svc("config", "apply", "--yes")
        self.secrets["webhook"] = find_secret(applied, "zwhsec_")
        created = self.svc("keys", "create", "--label", "backend", "--scopes", KEY_SCOPES)
        self.secrets["key"] = find_secret(created, "zpk_")
        exported = self.svc("export", "--format", "dotenv")["content"]
        env = parse_dotenv(exported)
        env.update(SVC_WEBHOOK_SECRET=self.secrets["webhook"], SVC_API_KEY=self.secrets["key"],
                   DATABASE_URL=f"sqlite:///{self.project / 'reference-app.db'}",
                   SVC_API_URL=self.api_url, SVC_PORTAL_URL=self.portal_url)
        write_private(self.project / ".env", env)
        self.app = Process.start([sys.executable, "-m", "reference_app", "--host", "127.0.0.1",
                                  "--port", str(self.app_port)], self.project,
                                 {**clean_env(), **env})
        app = self.app
        wait_until("the reference app answering", lambda: answers(app, lambda: httpx.get(
            f"{self.origin}/.well-known/svc.json", timeout=2)), 30)

    def verify_runtime(self) -> None:
        verified = self.svc("runtime", "verify")
        if verified.get("runtime", {}).get("status") != "active":
            raise StepFailed(f"runtime verify: {verified}")
        self.svc("runtime", "request-domain")

    def approve(self) -> None:
        self.ops("review", "approve", self.slug)
        self.ops("domain", "approve", self.slug, "--skip-dns-check")
        self.ops("allowlist", "add", PAY_TO)
        wait_until("the router serving the runtime", lambda: self.http.get(
            "/.well-known/svc.json", headers={"host": self.runtime_host}).status_code == 200,
            10)

    def pay(self) -> None:
        self.balance_before = self.balance()
        login = self.app_call("POST", "/api/session", {"name": "Player One"})
        self.token = login["token"]
        self.user_id = login["player"]["developerUserId"]
        self.delivery_id, self.wallet = pay_from_runtime(
            self.http, self.port, self.slug, PRODUCT, self.user_id)
        wait_until("the item granted from the signed webhook",
                   lambda: self.granted() == 1, 20)

    def settle(self) -> None:
        before = self.balance_before
        wait_until("the charge settled and payment.settled at the app",
                   lambda: self.delivery_settled() and self.app_saw_settled(), 40, 0.2)
        after = wait_until("pay_to's balance grown by the price",
                           lambda: (b := self.balance()) >= before + 10_000 and b, 10)
        self.balance_after = after

    # -- reads --------------------------------------------------------------------------------

    def app_call(self, method: str, path: str, body: dict[str, Any] | None = None,
                 token: str | None = None) -> dict[str, Any]:
        """The reference app through the router, as its page calls it."""
        headers = {"host": self.runtime_host}
        if token:
            headers["authorization"] = f"Bearer {token}"
        answer = self.http.request(method, path, headers=headers, json=body)
        if answer.status_code != 200:
            raise StepFailed(f"app {path}: {answer.status_code} {answer.text[:300]}")
        result: dict[str, Any] = answer.json()
        return result

    def inventory(self) -> dict[str, Any]:
        return self.app_call("GET", "/api/inventory", token=self.token)

    def granted(self) -> int:
        return item_count(self.inventory(), PRODUCT)

    def delivery_settled(self) -> bool:
        answer = self.http.get(f"/api/deliveries/{self.delivery_id}", headers={
            **self.host("api"), "authorization": f"Bearer {self.secrets['key']}"})
        if answer.status_code != 200:
            raise StepFailed(f"delivery lookup: {answer.status_code} {answer.text[:300]}")
        body = answer.json()
        delivery = body.get("delivery", body)
        return bool(delivery.get("settlementStatus") == "settled")

    def app_saw_settled(self) -> bool:
        return settlement_recorded(self.project / "reference-app.db", self.delivery_id)

    def balance(self) -> int:
        answer = self.http.get("/api/public/usdc-balance", headers=self.host("portal"),
                               params={"address": PAY_TO})
        return int(answer.json()["balanceAtomic"] or 0)

    def close(self) -> None:
        for process in (self.app, self.server):
            if process is not None:
                process.stop()
        self.http.close()
        self.browser.close()


def pay_from_runtime(http: httpx.Client, port: int, slug: str, product: str,
                     user_id: str) -> tuple[str, str]:
    """A new user pays ``product`` on the runtime ``<slug>.apps.localhost``: the wallet signs
    the permit the portal serves, the portal's return-code call, the summary exchanged from
    the runtime's origin, the product route. Returns the delivery id and the wallet."""
    wallet = Account.create()
    budget = authorize_on_runtime(http, port, slug, wallet)
    return pay_on_runtime(http, port, budget, product, user_id), wallet.address


@dataclass(frozen=True)
class RuntimeBudget:
    """A budget a wallet signed for an app: its summary code pays again until it expires."""

    slug: str
    wallet: str
    spender: str
    summary_code: str


def authorize_on_runtime(http: httpx.Client, port: int, slug: str,
                         wallet: LocalAccount) -> RuntimeBudget:
    """The wallet signs the permit the portal serves (``BUDGET_ATOMIC``), the portal's
    return-code call: the budget's summary code, as the runtime gets it back."""
    portal = f"portal.localhost:{port}"
    runtime_url = f"http://{slug}.apps.localhost:{port}"
    deadline = int(time.time()) + 86400
    permit = http.get("/api/portal/permit", headers={"host": portal}, params={
        "owner": wallet.address, "value": str(BUDGET_ATOMIC), "deadline": str(deadline)})
    if permit.status_code != 200:
        raise StepFailed(f"permit typed data: {permit.status_code} {permit.text[:300]}")
    typed = permit.json()["typedData"]
    message = typed["message"]
    for name in ("value", "nonce", "deadline"):  # decimal strings on the wire
        message[name] = int(message[name])
    signed = Account.sign_typed_data(wallet.key, full_message=typed)
    summary = _post(http, port, "/api/authorizations/return-code", f"http://{portal}", {
        "app": slug, "returnUrl": f"{runtime_url}/svc-auth-return?app={slug}",
        "permit": {"owner": wallet.address, "value": str(BUDGET_ATOMIC),
                   "nonce": message["nonce"], "deadline": deadline,
                   "signature": "0x" + signed.signature.hex().removeprefix("0x")}})
    return RuntimeBudget(slug, wallet.address, message["spender"], summary["code"])


def pay_on_runtime(http: httpx.Client, port: int, budget: RuntimeBudget, product: str,
                   user_id: str, key: str | None = None) -> str:
    """The summary exchanged from the runtime's origin, the product route (idempotency
    ``key``, by default one per product and wallet); returns the delivery id."""
    slug = budget.slug
    runtime_url = f"http://{slug}.apps.localhost:{port}"
    key = key or f"quickstart:{product}:{budget.wallet.lower()}"
    exchanged = _post(http, port, "/api/authorizations/payment-code", runtime_url, {
        "authorizationCode": budget.summary_code,
        "paymentUrl": f"http://api.localhost:{port}/api/pay/{slug}/{product}",
        "developerUserId": user_id, "idempotencyKey": key})
    paid = _post(http, port, f"/api/pay/{slug}/{product}", runtime_url, {
        "authorizationCode": exchanged["authorization"]["authorizationCode"],
        "developerUserId": user_id, "idempotencyKey": key, "source": "quickstart"},
        {"x-wallet-address": budget.wallet, "x-svc-budget-spender": budget.spender})
    return find_delivery_id(paid)


def _post(http: httpx.Client, port: int, path: str, origin: str, body: dict[str, Any],
          extra: dict[str, str] | None = None) -> dict[str, Any]:
    answer = http.post(path, headers={"host": f"api.localhost:{port}", "origin": origin,
                                      **(extra or {})}, json=body)
    if answer.status_code not in (200, 201):
        raise StepFailed(f"{path}: {answer.status_code} {answer.text[:300]}")
    result: dict[str, Any] = answer.json()
    return result


def find_secret(answer: Any, prefix: str) -> str:
    """The one value starting with ``prefix`` anywhere in a JSON answer."""
    found = re.search(rf'"({re.escape(prefix)}[A-Za-z0-9_-]+)"', json.dumps(answer))
    if not found:
        raise StepFailed(f"no {prefix} secret in the answer")
    return found.group(1)


def find_delivery_id(answer: dict[str, Any]) -> str:
    found = re.search(r'"(ztdlv_[A-Za-z0-9]+)"', json.dumps(answer))
    if not found:
        raise StepFailed(f"no delivery id in the product route's answer: {answer}")
    return found.group(1)


def item_count(inventory: dict[str, Any], product: str) -> int:
    return sum(int(i["count"]) for i in inventory["items"] if i["productSlug"] == product)


def settlement_recorded(store: Path, delivery_id: str) -> bool:
    """Whether the app's own store recorded ``payment.settled`` for the delivery: the
    developer's database, read as the developer would (the app shows no settlement)."""
    if not store.exists():
        return False
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT 1 FROM refapp_settlements WHERE delivery_id = ?",
                         (delivery_id,)).fetchone()
    return row is not None


def parse_dotenv(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#") and value.strip():
            values[name.strip()] = value.split(" #")[0].strip()
    return values


def write_private(path: Path, values: dict[str, str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{k}={v}\n" for k, v in values.items()))


@contextmanager
def quickstart(root: Path) -> Iterator[Quickstart]:
    run = Quickstart(root)
    try:
        yield run
    finally:
        run.close()


def run_once(root: Path, on_step: Callable[[str, float], None] | None = None) -> Result:
    """The whole flow once; raises :class:`StepFailed` naming the step that failed."""
    with quickstart(root) as run:
        began = time.perf_counter()
        run.start_service()
        result = Result(time.perf_counter() - began)
        actions: list[tuple[str, Callable[[], None]]] = [
            ("sign up", run.sign_up), ("sign in the CLI", run.sign_in_cli),
            ("configure", run.configure), ("verify the runtime", run.verify_runtime),
            ("approve (operator)", run.approve), ("pay", run.pay), ("settle", run.settle)]
        for name, action in actions:
            began = time.perf_counter()
            try:
                action()
            except StepFailed as exc:
                raise StepFailed(f"step '{name}': {exc}") from exc
            result.steps[name] = time.perf_counter() - began
            if on_step is not None:
                on_step(name, result.steps[name])
        result.facts = {"slug": run.slug, "deliveryId": run.delivery_id,
                        "inventory": run.inventory(), "balanceBefore": run.balance_before,
                        "balanceAfter": run.balance_after, "secrets": dict(run.secrets)}
    # Read once both have stopped: everything they printed, shutdown included.
    result.facts["serverOutput"] = run.server.output() if run.server else ""
    result.facts["appOutput"] = run.app.output() if run.app else ""
    return result


# --------------------------------------------------------------------------- report


def machine() -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; uname -m "
            f"{platform.machine()}; nproc {os.cpu_count()}; python {platform.python_version()};"
            f" load {load}")


def section(results: list[Result]) -> str:
    def ms(value: float) -> str:
        return f"{value * 1000:,.0f} ms"

    rows = []
    for step in STEPS:
        values = [r.steps[step] for r in results]
        rows.append(f"| {step} | {ms(statistics.median(values))} | "
                    f"{' / '.join(ms(v) for v in values)} |")
    totals = [r.total for r in results]
    total = statistics.median(totals)
    starts = [r.start_seconds for r in results]
    met = "met" if total < TARGET_SECONDS else "NOT met"
    return "\n".join([
        "## Worker Quick Launch from zero (bench/quickstart_bench.py)", "",
        f"Machine: {machine()}.", "",
        "An empty database to a settled charge on the developer's own runtime, in dev mode "
        "(`svc-server dev`: SQLite, in-process chain, webhook and chain workers), through the "
        "console's forms, the `svc` and `svc-ops` executables and the public API only; the "
        "developer's runtime is the reference app copied by `svc init` and started from its "
        "`.env`. The permit is signed with eth-account over the typed data the portal serves "
        "(no browser). Each step ends when its outcome is observed (the table in the module "
        f"docstring). {len(results)} round(s), each from a fresh directory; median and every "
        "round.", "",
        "| Step | Median | Rounds |", "|---|---:|---|", *rows,
        f"| **total** | **{ms(total)}** | {' / '.join(ms(v) for v in totals)} |", "",
        f"Target: under {TARGET_SECONDS:.0f} s in dev mode ({met}). Not counted: starting "
        f"`svc-server dev` on the empty database (migrations, in-process chain deployment): "
        f"median {ms(statistics.median(starts))}. `settle` waits for the settlement batch's "
        "age (5 s in dev) and the chain cycle (1 s). `approve` runs three `svc-ops` "
        "processes and most of it is their start (the server's packages imported each time: "
        "4-5 s under the load shown); `configure` likewise runs four `svc` commands and "
        "starts the copied app. The machine is shared (see the load): compare rounds, not "
        "runs on other days.", ""])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, do not write the report")
    args = parser.parse_args()
    results = []
    for number in range(1, args.rounds + 1):
        root = Path(tempfile.mkdtemp(prefix="quickstart-bench-"))
        try:
            result = run_once(root, lambda step, s: print(f"  {step}: {s * 1000:,.0f} ms",
                                                          flush=True))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"round {number}: {result.total:.2f} s", flush=True)
        results.append(result)
    text = section(results)
    if args.no_write:
        print(text)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from report import write_section
        write_section("## Worker Quick Launch from zero", text)
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
