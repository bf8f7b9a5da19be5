/* svc runtime wallet: served by the service at {portal_url}/sdk/svc-modal.js for app runtimes.
 *
 *   <div id="wallet"></div>
 *   <script src="https://portal.example/sdk/svc-modal.js"></script>
 *   var wallet = SvcWallet.mount(document.getElementById("wallet"),
 *                                {app: "my-game", gameAccount: "Player One"});
 *   wallet.pay("retry-continue", {developerUserId: "u-1"}).then(...);
 *
 * It opens the portal's authorize page in an in-page iframe modal (mode=popup&embed=1), takes
 * the summary code that the service's /svc-auth-return page posts from inside that iframe
 * (exact origin and source checks), and shows the wallet card and pill of spec 3.8.
 * Everything it learns is a sync hint (spec 1.4 item 9): the app's server grants purchases
 * from signed webhooks, never from this script. It holds no secret and sets no cookie. */
(function () {
  "use strict";
  var CONFIG = "__SVC_CONFIG__";  // {"baseUrl": ..., "portalUrl": ...}, filled in when served
  var RETURN_TYPE = "svc:auth-return";
  var CANCEL_TYPE = "svc:authorize-cancel";
  var STORAGE_PREFIX = "svc:auth-summary:";
  var RETURN_PATH = "/svc-auth-return";

  /* Spec 3.8: state -> card status, primary button, pill text, pill colour, what the button
   * does. Colour is always shown with its text. `null` pill text: the budget in USDC. */
  var STATES = {
    checking: ["Checking payment", "Checking", "Checking", "muted-gray", null],
    game_login_needed: ["Game login needed", "Log in", "Log in", "neutral-gray", "login"],
    needs_connection: ["Payment off", "Enable payment", "Enable payment", "teal", "authorize"],
    opening_portal: ["Opening Portal", "Opening", "Opening", "teal", null],
    ready: ["Payment ready", "Manage", null, "green-teal", "manage"],
    needs_budget: ["Budget low", "Renew budget", "Renew budget", "amber", "renew"],
    budget_expired: ["Budget expired", "Renew budget", "Renew budget", "amber", "renew"],
    budget_revoked: ["Budget revoked", "Renew budget", "Renew budget", "amber", "renew"],
    sync_failed: ["Sync failed", "Try again", "Try again", "red", "sync"],
    unavailable: ["Unavailable", "Try again", "Unavailable", "muted-red", "sync"]
  };
  var COLORS = {  // [background, text]
    "muted-gray": ["#eef0f3", "#5b6475"], "neutral-gray": ["#dfe3ea", "#2f3645"],
    "teal": ["#d3f1ee", "#0d5c56"], "green-teal": ["#d2f4e2", "#0a6643"],
    "amber": ["#fcedcc", "#7f4500"], "red": ["#fde0df", "#9f1c1c"],
    "muted-red": ["#f3dcdc", "#74494a"]
  };
  var CSS = [
    ":host{all:initial;display:block;font:14px/1.45 system-ui,-apple-system,sans-serif;",
    "color:#1d2330}",
    ".pill{display:inline-flex;align-items:center;gap:.4rem;border:0;border-radius:999px;",
    "padding:.25rem .8rem;font:inherit;font-weight:600;cursor:pointer}",
    ".pill::before{content:'';width:.5rem;height:.5rem;border-radius:50%;",
    "background:currentColor}",
    ".brand{font-weight:700;letter-spacing:.02em}",
    ".card{margin-top:.5rem;border:1px solid #dfe3ea;border-radius:12px;padding:.75rem 1rem;",
    "background:#fff;max-width:24rem}",
    ".status{font-size:1.05rem;font-weight:600;margin:0 0 .4rem}",
    "dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .8rem;margin:0 0 .6rem}",
    "dt{color:#5b6475}dd{margin:0}",
    ".actions{display:flex;gap:.4rem;flex-wrap:wrap}",
    "button{font:inherit}",
    ".actions button,.copy{border:1px solid #2457d6;background:#fff;color:#2457d6;",
    "border-radius:8px;padding:.3rem .7rem;cursor:pointer}",
    ".actions .primary{background:#2457d6;color:#fff}",
    ".copy{padding:0 .4rem;margin-left:.3rem;font-size:.85em}",
    "button:disabled{opacity:.55;cursor:default}",
    "button:focus-visible{outline:3px solid #2457d6;outline-offset:2px}",
    ".note{color:#5b6475;font-size:.9em;margin:.4rem 0 0}"
  ].concat(Object.keys(COLORS).map(function (name) {
    // Classes, not style attributes: a runtime's CSP may refuse inline styles.
    return ".pill[data-color=" + name + "]{background:" + COLORS[name][0] + ";color:" +
           COLORS[name][1] + "}";
  })).join("");
  var MODAL_CSS = [
    ":host{all:initial}",
    ".backdrop{position:fixed;inset:0;background:rgba(16,20,30,.55);display:flex;",
    "align-items:center;justify-content:center;z-index:2147483647}",
    ".dialog{background:#fff;border-radius:14px;box-shadow:0 10px 40px rgba(0,0,0,.3);",
    "width:min(440px,94vw);height:min(640px,92vh);display:flex;flex-direction:column;",
    "overflow:hidden;font:14px/1.4 system-ui,sans-serif}",
    ".bar{display:flex;align-items:center;justify-content:space-between;padding:.4rem .75rem;",
    "border-bottom:1px solid #e3e6ec}",
    ".bar button{border:0;background:none;font:inherit;font-size:1.2rem;cursor:pointer;",
    "padding:.1rem .4rem}",
    ".bar button:focus-visible{outline:3px solid #2457d6}",
    "iframe{border:0;flex:1;width:100%}"
  ].join("");

  var config = typeof CONFIG === "object" ? CONFIG : {};

  function originOf(url) { return new URL(url).origin; }

  function usdc(atomic) {
    var text = String(atomic).replace(/^0+(?=\d)/, "");
    while (text.length < 7) { text = "0" + text; }
    var frac = text.slice(-6).replace(/0+$/, "");
    while (frac.length < 2) { frac += "0"; }
    return text.slice(0, -6) + "." + frac + " USDC";
  }

  function shortAddress(address) {
    return address ? address.slice(0, 6) + "…" + address.slice(-4) : "";
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "text") { node.textContent = attrs[name]; } else {
        node.setAttribute(name, attrs[name]);
      }
    });
    (children || []).forEach(function (child) { if (child) { node.appendChild(child); } });
    return node;
  }

  function styled(host, css) {
    var root = host.attachShadow({mode: "open"});
    if (root.adoptedStyleSheets !== undefined && window.CSSStyleSheet) {
      var sheet = new CSSStyleSheet();
      sheet.replaceSync(css);
      root.adoptedStyleSheets = [sheet];
    }
    return root;
  }

  function PaymentError(status, body) {
    this.name = "SvcPaymentError";
    this.status = status;
    this.code = (body && body.code) || (status ? "http_" + status : "network_error");
    this.message = (body && body.message) || (status ? "HTTP " + status :
                                                       "The payment service could not be reached.");
    this.budgetState = (body && body.budgetState) || null;
    this.body = body || {};
  }
  PaymentError.prototype = Object.create(Error.prototype);

  function call(url, options) {
    options = options || {};
    var init = {method: options.method || "GET", credentials: "omit", cache: "no-store",
                headers: Object.assign({}, options.headers || {})};
    if (options.body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(options.body);
    }
    return fetch(url, init).then(function (response) {
      return response.text().then(function (text) {
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
        if (!response.ok) { throw new PaymentError(response.status, body); }
        return body;
      });
    }, function () { throw new PaymentError(0, null); });
  }

  function storage() {
    try { return window.sessionStorage; } catch (e) { return null; }
  }

  function uuid() {
    if (window.crypto && window.crypto.randomUUID) { return window.crypto.randomUUID(); }
    var bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) {
      return b.toString(16).padStart(2, "0"); }).join("");
  }

  /* One wallet card + pill for one app on its runtime page. */
  function Wallet(target, options) {
    if (!options || !options.app) { throw new Error("SvcWallet.mount needs {app: <slug>}"); }
    this.app = options.app;
    this.portalUrl = (options.portalUrl || config.portalUrl || "").replace(/\/$/, "");
    this.baseUrl = (options.baseUrl || config.baseUrl || "").replace(/\/$/, "");
    this.portalOrigin = originOf(this.portalUrl);
    this.gameAccount = options.gameAccount === undefined ? null : options.gameAccount;
    this.requireLogin = options.requireLogin !== undefined ? options.requireLogin
                                                           : options.gameAccount !== undefined;
    this.onLogin = options.onLogin || null;
    this.listeners = [];
    this.view = {};
    this.summary = null;
    this.modal = null;
    this.state = "checking";
    this.root = styled(target, CSS);
    this._onMessage = this._message.bind(this);
    window.addEventListener("message", this._onMessage);
    this._render();
    if (!options.preview) { this.sync(); }
  }

  Wallet.prototype.on = function (listener) { this.listeners.push(listener); return this; };

  Wallet.prototype._set = function (state, view) {
    this.state = state;
    if (view) { this.view = Object.assign({}, this.view, view); }
    this._render();
    var self = this;
    this.listeners.forEach(function (listener) {
      try { listener(self.state, self.view); } catch (e) { /* the app's listener */ }
    });
  };

  Wallet.prototype.storageKey = function () { return STORAGE_PREFIX + this.app; };

  Wallet.prototype.code = function () {
    var store = storage();
    return store ? store.getItem(this.storageKey()) : null;
  };

  Wallet.prototype.setGameAccount = function (label) {
    this.gameAccount = label || null;
    return this.sync();
  };

  /* Re-read the summary the runtime holds and show what it means. */
  Wallet.prototype.sync = function () {
    var self = this;
    if (self.requireLogin && !self.gameAccount) {
      self._set("game_login_needed");
      return Promise.resolve(self.state);
    }
    var code = self.code();
    if (!code) {
      self._set("needs_connection", {wallet: null, remaining: null, balance: null});
      return Promise.resolve(self.state);
    }
    self._set("checking");
    return call(self.baseUrl + "/api/authorizations/summary?code=" + encodeURIComponent(code))
      .then(function (summary) {
        self.summary = summary;
        self._set(self._stateOf(summary), {wallet: summary.ownerWallet,
                                           remaining: summary.remaining});
        self._balance(summary.ownerWallet);
        return self.state;
      }, function (error) {
        self._set(self._failureState(error));
        return self.state;
      });
  };

  Wallet.prototype._stateOf = function (summary) {
    if (summary.status === "revoked") { return "budget_revoked"; }
    if (summary.status === "superseded") {
      // A newer budget replaced this one: the portal's shortcut confirms it in one step.
      this._forget();
      return "needs_connection";
    }
    if (summary.status !== "active" || Date.parse(summary.budgetExpiresAt) <= Date.now()) {
      return "budget_expired";
    }
    return BigInt(summary.remaining) > 0n ? "ready" : "needs_budget";
  };

  Wallet.prototype._failureState = function (error) {
    if (error.budgetState) { return error.budgetState; }
    if (error.code === "AUTHORIZATION_CODE_EXPIRED" || error.code === "AUTHORIZATION_CODE_INVALID") {
      this._forget();  // the summary lapsed: a new one comes from the portal
      return "needs_connection";
    }
    if (error.status === 403 || error.status === 404) { return "unavailable"; }
    return "sync_failed";
  };

  Wallet.prototype._forget = function () {
    var store = storage();
    if (store) { store.removeItem(this.storageKey()); }
    this.summary = null;
  };

  Wallet.prototype._balance = function (address) {
    var self = this;
    call(self.portalUrl + "/api/public/usdc-balance?address=" + encodeURIComponent(address))
      .then(function (answer) {
        if (answer.balanceAtomic !== null) { self._set(self.state, {balance: answer.balanceAtomic}); }
      }, function () { /* the balance is informative only */ });
  };

  /* Pay for a product through the product route (spec 4.1): exchange the summary code for a
   * product-bound payment code from this page's origin, then call the route. */
  Wallet.prototype.pay = function (productSlug, options) {
    var self = this, opts = options || {}, code = self.code();
    if (!code || !self.summary) {
      self._set(self.requireLogin && !self.gameAccount ? "game_login_needed"
                                                       : "needs_connection");
      return Promise.reject(new PaymentError(0, {code: "authorization_required",
        message: "Enable payment first."}));
    }
    var key = opts.idempotencyKey || "svc-modal:" + productSlug + ":" + uuid();
    var paymentUrl = self.baseUrl + "/api/pay/" + encodeURIComponent(self.app) + "/" +
                     encodeURIComponent(productSlug);
    var exchange = {authorizationCode: code, paymentUrl: paymentUrl, idempotencyKey: key};
    ["developerUserId", "orderId", "accountConnectionId"].forEach(function (name) {
      if (opts[name]) { exchange[name] = opts[name]; }
    });
    return call(self.baseUrl + "/api/authorizations/payment-code", {method: "POST", body: exchange})
      .then(function (answer) {
        var payment = answer.authorization;
        var body = {authorizationCode: payment.authorizationCode, idempotencyKey: key,
                    source: "svc-modal"};
        ["developerUserId", "orderId", "accountConnectionId"].forEach(function (name) {
          if (opts[name]) { body[name] = opts[name]; }
        });
        return call(paymentUrl, {method: "POST", body: body, headers: {
          "x-wallet-address": payment.ownerWallet, "x-svc-budget-spender": payment.spender}});
      })
      .then(function (result) {
        self._set(BigInt(result.remaining) > 0n ? "ready" : "needs_budget",
                  {remaining: result.remaining});
        return result;
      }, function (error) {
        if (error.budgetState || error.code === "AUTHORIZATION_CODE_EXPIRED" ||
            error.code === "AUTHORIZATION_CODE_INVALID" || error.code === "APP_UNAVAILABLE" ||
            error.code === "RECIPIENT_NOT_ALLOWLISTED" || error.code === "APP_PAY_TO_INVALID") {
          self._set(self._failureState(error));
        }
        throw error;
      });
  };

  /* Open the portal's authorize page in the modal; renew asks for a fresh permit. */
  Wallet.prototype.authorize = function (options) {
    var params = new URLSearchParams({app: this.app,
      "return": window.location.origin + RETURN_PATH + "?app=" + encodeURIComponent(this.app),
      mode: "popup", embed: "1"});
    if (options && options.renew) { params.set("renew", "1"); }
    return this._open(this.portalUrl + "/authorize?" + params.toString());
  };

  /* A backend handoff's portalUrl (spec 4.5), opened in the same modal. */
  Wallet.prototype.openPortal = function (portalUrl) {
    var url = new URL(portalUrl);
    if (url.origin !== this.portalOrigin || url.pathname !== "/authorize") {
      throw new Error("not a portal authorize URL");
    }
    url.searchParams.set("mode", "popup");
    url.searchParams.set("embed", "1");
    return this._open(url.toString());
  };

  Wallet.prototype.manage = function () {
    window.open(this.portalUrl + "/account", "_blank", "noopener");
  };

  Wallet.prototype._open = function (url) {
    var self = this;
    self.close();
    var previous = self.state;
    var host = el("div", {"data-svc-modal": self.app});
    var root = styled(host, MODAL_CSS);
    var close = el("button", {type: "button", "aria-label": "Close", text: "×"});
    var frame = el("iframe", {src: url, title: "Authorize payments"});
    var dialog = el("div", {"class": "dialog", role: "dialog", "aria-modal": "true",
                            "aria-label": "Authorize payments"}, [
      el("div", {"class": "bar"}, [el("strong", {text: "Authorize payments"}), close]),
      frame]);
    root.appendChild(el("div", {"class": "backdrop"}, [dialog]));
    document.body.appendChild(host);
    var restoreFocus = document.activeElement;
    self.modal = {host: host, frame: frame, previous: previous, restoreFocus: restoreFocus,
                  keys: function (event) { if (event.key === "Escape") { self.close(); } },
                  // A modal keeps focus: tabbing out to the page behind brings it back.
                  trap: function (event) {
                    if (event.target !== host) { close.focus(); }
                  }};
    close.addEventListener("click", function () { self.close(); });
    document.addEventListener("keydown", self.modal.keys);
    document.addEventListener("focusin", self.modal.trap);
    close.focus();
    self._set("opening_portal");
    return frame;
  };

  Wallet.prototype.close = function () {
    var modal = this.modal;
    if (!modal) { return; }
    this.modal = null;
    document.removeEventListener("keydown", modal.keys);
    document.removeEventListener("focusin", modal.trap);
    modal.host.remove();
    if (modal.restoreFocus && modal.restoreFocus.focus) { modal.restoreFocus.focus(); }
    if (this.state === "opening_portal") { this._set(modal.previous); }
  };

  /* Exact checks both ways: the code comes from our /svc-auth-return page on this runtime's
   * own origin, loaded inside our modal's iframe; a cancel comes from the portal origin. */
  Wallet.prototype._message = function (event) {
    var modal = this.modal, data = event.data;
    if (!modal || event.source !== modal.frame.contentWindow || !data ||
        typeof data !== "object") {
      return;
    }
    if (event.origin === window.location.origin && data.type === RETURN_TYPE &&
        data.app === this.app && typeof data.code === "string") {
      var store = storage();
      if (store) { store.setItem(this.storageKey(), data.code); }
      this.close();
      this.sync();
    } else if (event.origin === this.portalOrigin && data.type === CANCEL_TYPE &&
               data.app === this.app) {
      this.close();
    }
  };

  Wallet.prototype._act = function (action) {
    if (action === "login") {
      if (this.onLogin) { this.onLogin(); }
    } else if (action === "authorize") {
      this.authorize();
    } else if (action === "renew") {
      this.authorize({renew: true});
    } else if (action === "manage") {
      this.manage();
    } else if (action === "sync") {
      this.sync();
    }
  };

  Wallet.prototype._render = function () {
    var self = this, spec = STATES[self.state], view = self.view;
    var pill = el("button", {type: "button", "class": "pill", "data-state": self.state,
                             "data-color": spec[3]}, [
      el("span", {"class": "brand", text: "svc"}),
      el("span", {"class": "pill-text", text: spec[2] === null ? usdc(view.remaining || 0)
                                                                : spec[2]})]);
    pill.setAttribute("aria-label", "Payment: " + spec[0]);
    pill.disabled = spec[4] === null;
    pill.addEventListener("click", function () { self._act(spec[4]); });
    var rows = [["Game account", self.gameAccount || "—"], ["Payment", spec[0]]];
    var walletCell = el("dd", {text: view.wallet ? shortAddress(view.wallet) : "—"});
    if (view.wallet && navigator.clipboard) {
      var copy = el("button", {type: "button", "class": "copy", text: "Copy",
                               "aria-label": "Copy payment wallet address"});
      copy.addEventListener("click", function () {
        navigator.clipboard.writeText(view.wallet).then(function () { copy.textContent = "Copied"; },
                                                        function () { /* not allowed */ });
      });
      walletCell.appendChild(copy);
    }
    var list = el("dl");
    rows.forEach(function (row) {
      list.appendChild(el("dt", {text: row[0]}));
      list.appendChild(el("dd", {text: row[1], "class": row[0] === "Payment" ? "state" : ""}));
    });
    list.appendChild(el("dt", {text: "Payment wallet"}));
    list.appendChild(walletCell);
    list.appendChild(el("dt", {text: "USDC balance"}));
    list.appendChild(el("dd", {"class": "balance",
                               text: view.balance != null ? usdc(view.balance) : "—"}));
    list.appendChild(el("dt", {text: "Budget remaining"}));
    list.appendChild(el("dd", {"class": "remaining",
                               text: view.remaining != null ? usdc(view.remaining) : "—"}));
    var primary = el("button", {type: "button", "class": "primary", text: spec[1]});
    primary.disabled = spec[4] === null;
    primary.addEventListener("click", function () { self._act(spec[4]); });
    var actions = [primary];
    if (spec[1] !== "Renew budget") {
      var renew = el("button", {type: "button", text: "Renew budget"});
      renew.disabled = !view.wallet;
      renew.addEventListener("click", function () { self._act("renew"); });
      actions.push(renew);
    }
    var sync = el("button", {type: "button", text: "Sync"});
    sync.addEventListener("click", function () { self.sync(); });
    actions.push(sync);
    if (spec[1] !== "Manage") {
      var manage = el("button", {type: "button", text: "Manage"});
      manage.addEventListener("click", function () { self.manage(); });
      actions.push(manage);
    }
    var card = el("section", {"class": "card", "aria-label": "Payment wallet",
                              "data-state": self.state}, [
      el("p", {"class": "status", role: "status", text: spec[0]}),
      list, el("div", {"class": "actions"}, actions)]);
    while (self.root.firstChild) { self.root.removeChild(self.root.firstChild); }
    self.root.appendChild(pill);
    self.root.appendChild(card);
  };

  Wallet.prototype.destroy = function () {
    this.close();
    window.removeEventListener("message", this._onMessage);
    while (this.root.firstChild) { this.root.removeChild(this.root.firstChild); }
  };

  window.SvcWallet = {
    mount: function (target, options) { return new Wallet(target, options); },
    /* A card frozen in one state with sample values, for docs and design reviews. */
    preview: function (target, state, view) {
      var account = state === "game_login_needed" ? null : "Player One";
      var wallet = new Wallet(target, {app: "preview", preview: true, gameAccount: account});
      wallet._set(state, view || {});
      return wallet;
    },
    STATES: STATES,
    COLORS: COLORS,
    PaymentError: PaymentError
  };
})();
