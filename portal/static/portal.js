/* Shared by the portal pages: page data, safe DOM building, our JSON APIs, the wallet.
 * No HTML from strings anywhere (the CSP requires Trusted Types and allows none). */
(function () {
  "use strict";

  function data() {
    return JSON.parse(document.getElementById("svc-data").textContent);
  }

  /* el("p", {class: "hint"}, "text", child) -> a node; strings become text nodes. */
  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (value === null || value === undefined || value === false) { return; }
      if (name === "text") { node.textContent = value; } else { node.setAttribute(name, value); }
    });
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) { continue; }
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function replace(target, node) {
    while (target.firstChild) { target.removeChild(target.firstChild); }
    if (node) { target.appendChild(node); }
  }

  /* "4990000" -> "4.99": integer atomic units, never floating point. */
  function usdc(atomic) {
    var text = String(atomic).replace(/^0+(?=\d)/, "");
    while (text.length < 7) { text = "0" + text; }
    var whole = text.slice(0, -6), frac = text.slice(-6).replace(/0+$/, "");
    while (frac.length < 2) { frac += "0"; }
    return whole + "." + frac;
  }

  function shortAddress(address) {
    return address ? address.slice(0, 6) + "…" + address.slice(-4) : "";
  }

  function plainDate(date) {
    return date.toLocaleDateString("en-GB", {day: "numeric", month: "long", year: "numeric",
                                             timeZone: "UTC"});
  }

  function Failure(status, body) {
    this.status = status;
    this.code = (body && body.code) || (status ? "http_" + status : "network_error");
    this.message = (body && body.message) ||
      (status ? "The service answered " + status + "." : "The service could not be reached.");
    this.body = body || {};
  }

  /* fetch + JSON; resolves to the body, rejects with a Failure in the error envelope. */
  function call(url, options) {
    options = options || {};
    var headers = Object.assign({}, options.headers || {});
    var init = {method: options.method || "GET", headers: headers,
                credentials: options.credentials || "same-origin", cache: "no-store"};
    if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(options.body);
    }
    return fetch(url, init).then(function (response) {
      return response.text().then(function (text) {
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
        if (!response.ok) { throw new Failure(response.status, body); }
        return body;
      });
    }, function () { throw new Failure(0, null); });
  }

  /* The portal's own JSON endpoints: same origin, the page's CSRF token on writes. */
  function api(path, options) {
    options = Object.assign({}, options || {});
    if (options.method && options.method !== "GET") {
      options.headers = Object.assign({"x-csrf-token": options.csrf || data().csrfToken},
                                      options.headers || {});
    }
    return call(path, options);
  }

  /* The payment API on its own origin (CORS, no cookies). */
  function payments(path, options) {
    options = Object.assign({credentials: "omit"}, options || {});
    return call(data().baseUrl + path, options);
  }

  function utf8Hex(text) {
    var bytes = new TextEncoder().encode(text), out = "0x";
    for (var i = 0; i < bytes.length; i++) { out += bytes[i].toString(16).padStart(2, "0"); }
    return out;
  }

  /* A uint256 as a canonical decimal string ("0050" -> "50"); null if it is not one. */
  function decimal(number) {
    var text = String(number);
    return /^[0-9]+$/.test(text) ? text.replace(/^0+(?=[0-9])/, "") : null;
  }

  function sameNumber(a, b) {
    return decimal(a) !== null && decimal(a) === decimal(b);
  }

  /* Spec 1.10: the only typed data we ever ask a wallet to sign is the token's Permit to
   * BudgetSpenderV2; check what the server handed us before the wallet sees it. Its value
   * and deadline must be exactly the ones the page asked for, which are what the page told
   * the person (the amount, the expiry; 0 for a revoke): the wallet shows raw numbers, so a
   * different amount or expiry would otherwise be signed, and then submitted, unnoticed. */
  function checkPermit(typed, expected) {
    var fields = (typed.types.Permit || []).map(function (f) { return f.name + ":" + f.type; });
    var message = typed.message || {};
    var ok = typed.primaryType === "Permit" &&
      Object.keys(typed.types).sort().join(",") === "EIP712Domain,Permit" &&
      fields.join(",") ===
        "owner:address,spender:address,value:uint256,nonce:uint256,deadline:uint256" &&
      Object.keys(message).sort().join(",") === "deadline,nonce,owner,spender,value" &&
      String(typed.domain.verifyingContract).toLowerCase() === expected.token.toLowerCase() &&
      String(message.spender).toLowerCase() === expected.spender.toLowerCase() &&
      String(message.owner).toLowerCase() === expected.owner.toLowerCase();
    if (!ok) { throw new Failure(0, {code: "unexpected_typed_data",
                                     message: "The permit to sign was not the expected one."}); }
    if (!sameNumber(message.value, expected.value) ||
        !sameNumber(message.deadline, expected.deadline)) {
      throw new Failure(0, {code: "unexpected_typed_data",
        message: "The permit prepared for your wallet is not for the amount and expiry you " +
                 "chose. Nothing was signed; try again."});
    }
    return typed;
  }

  /* An EIP-1193 wallet: the browser's (window.ethereum) or, in dev mode, the dev wallet. */
  function Wallet(provider, kind) {
    this.provider = provider;
    this.kind = kind;
    this.address = null;
  }
  Wallet.prototype.connect = function (chainId) {
    var self = this;
    return self.provider.request({method: "eth_requestAccounts"}).then(function (accounts) {
      if (!accounts || !accounts.length) { throw new Failure(0, {code: "no_account",
        message: "The wallet shared no account."}); }
      self.address = String(accounts[0]).toLowerCase();
      return self.provider.request({method: "eth_chainId"});
    }).then(function (current) {
      if (String(current).toLowerCase() === chainId.toLowerCase()) { return null; }
      return self.provider.request({method: "wallet_switchEthereumChain",
                                    params: [{chainId: chainId}]});
    }).then(function () { return self.address; });
  };
  Wallet.prototype.signTypedData = function (typed) {
    return this.provider.request({method: "eth_signTypedData_v4",
                                  params: [this.address, JSON.stringify(typed)]});
  };
  Wallet.prototype.personalSign = function (text) {
    return this.provider.request({method: "personal_sign", params: [utf8Hex(text), this.address]});
  };
  Wallet.prototype.label = function () {
    return this.kind === "dev" ? "dev wallet (test funds, dev mode only)" : "browser wallet";
  };

  function wallet(kind) {
    if (kind === "dev") {
      if (!window.SvcDevWallet) { return null; }
      return new Wallet(window.SvcDevWallet, "dev");
    }
    return window.ethereum ? new Wallet(window.ethereum, "browser") : null;
  }

  /* Wallet errors in words: 4001 is EIP-1193's "user rejected". */
  function describe(error) {
    if (error && error.code === 4001) {
      return "You declined in your wallet. Nothing was signed.";
    }
    if (error instanceof Failure) { return error.message; }
    return (error && error.message) || "Something went wrong.";
  }

  function show(id, text) {
    var node = document.getElementById(id);
    node.textContent = text || "";
    if (id === "error") { node.hidden = !text; }
  }

  /* The page renders its wallet buttons disabled; they are enabled only once they do
     something (a click before the page script ran did nothing). */
  function enableWalletButtons(connect) {
    var kinds = {"connect": "browser", "dev-wallet": "dev"};
    Object.keys(kinds).forEach(function (id) {
      var button = document.getElementById(id);
      if (!button) { return; }
      button.addEventListener("click", function () { connect(kinds[id]); });
      button.disabled = false;
    });
  }

  function permitDeadline(days) {
    return Math.floor(Date.now() / 1000) + days * 86400;
  }

  window.SvcPortal = {data: data, el: el, replace: replace, usdc: usdc, call: call, api: api,
                      payments: payments, shortAddress: shortAddress, plainDate: plainDate,
                      checkPermit: checkPermit, wallet: wallet, describe: describe, show: show,
                      permitDeadline: permitDeadline, Failure: Failure,
                      enableWalletButtons: enableWalletButtons};
})();
