/* The hosted entry: the whole hosted-entry path of spec 1.3 in the browser. Authorize if
 * needed (the portal's authorize page returns here with ?code=), exchange the summary code
 * for a product-bound payment code, pay. What it shows is feedback only: the app's own
 * server fulfils from its webhook (spec 1.4). */
(function () {
  "use strict";
  var P = window.SvcPortal, d = P.data();
  var SUMMARY = "svc:portal-summary:" + d.app.slug;
  var PENDING = "svc:portal-pending:" + d.app.slug;
  var summary = null;
  var $ = function (id) { return document.getElementById(id); };
  var products = {};
  d.products.forEach(function (p) { products[p.slug] = p; });

  function store(key, value) {
    try {
      if (value === null) { sessionStorage.removeItem(key); } else { sessionStorage.setItem(key, value); }
    } catch (e) { /* storage off: the flow still works within this page */ }
  }
  function stored(key) {
    try { return sessionStorage.getItem(key); } catch (e) { return null; }
  }

  function buttons(on) {
    Array.prototype.forEach.call(document.querySelectorAll("button.buy"), function (b) {
      b.disabled = !on;
    });
  }

  function status(text) { $("budget-status").textContent = text; }

  function describeBudget() {
    if (!summary) {
      status("No budget is authorized in this browser yet: your first purchase asks you to " +
             "authorize one in your wallet.");
    } else {
      status("Budget: " + P.usdc(summary.remaining) + " USDC left · wallet " +
             P.shortAddress(summary.ownerWallet));
    }
  }

  /* Take a returned ?code= out of the address bar (and history) before anything else. */
  function adoptReturnCode() {
    var url = new URL(window.location.href);
    var code = url.searchParams.get("code");
    if (!code) { return; }
    store(SUMMARY, code);
    url.searchParams.delete("code");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }

  function loadSummary() {
    var code = stored(SUMMARY);
    if (!code) { return Promise.resolve(null); }
    return P.payments("/api/authorizations/summary?code=" + encodeURIComponent(code))
      .then(function (answer) {
        summary = answer;
        return answer;
      }, function (error) {
        if (error.status === 401 || error.status === 410) { store(SUMMARY, null); }
        summary = null;
        return null;
      });
  }

  function authorize(renew) {
    window.location.assign(renew ? d.renewUrl : d.authorizeUrl);
  }

  function showPaid(product, answer) {
    var box = $("result");
    box.className = "done";
    P.replace(box, P.el("div", {},
      P.el("p", {}, P.el("strong", {text: "Paid " + P.usdc(answer.amountAtomic) + " USDC for " +
                                          product.name + "."})),
      P.el("p", {text: "Delivery " + answer.deliveryId + " · budget left " +
                       P.usdc(answer.remaining) + " USDC."}),
      P.el("p", {class: "hint", text: d.app.name + " delivers it from its own server; this " +
                                      "page only confirms the payment was recorded."})));
    box.focus();
  }

  function showFailure(product, error) {
    var box = $("error");
    var budgetState = error.body && error.body.budgetState;
    var words = {budget_revoked: "Your budget was revoked.",
                 budget_expired: "Your budget has expired.",
                 needs_budget: "Your budget does not cover " + product.name + "."};
    P.replace(box, P.el("p", {text: words[budgetState] || P.describe(error)}));
    if (budgetState) {
      var renew = P.el("button", {type: "button", text: "Renew budget"});
      renew.addEventListener("click", function () {
        store(PENDING, product.slug);
        authorize(true);
      });
      box.appendChild(renew);
    }
    box.hidden = false;
  }

  function budgetState() {
    if (summary.status === "revoked") { return "budget_revoked"; }
    return summary.status === "active" ? "needs_budget" : "budget_expired";
  }

  function buy(slug, resumed) {
    var product = products[slug];
    if (!product) { return; }
    $("error").hidden = true;
    $("result").textContent = "";
    if (!summary || summary.status !== "active" ||
        BigInt(summary.remaining) < BigInt(product.priceAtomic)) {
      if (resumed && summary) {  // just back from authorizing: say why, never loop
        showFailure(product, {body: {budgetState: budgetState()}});
        return;
      }
      store(PENDING, slug);  // resumed when the authorize page brings us back
      authorize(Boolean(summary));
      return;
    }
    buttons(false);
    $("result").textContent = "Paying " + P.usdc(product.priceAtomic) + " USDC for " +
                              product.name + "…";
    var key = "hosted:" + slug + ":" + window.crypto.randomUUID();
    P.payments("/api/authorizations/payment-code", {method: "POST", body: {
      authorizationCode: stored(SUMMARY), paymentUrl: product.paymentUrl,
      idempotencyKey: key}})
      .then(function (answer) {
        var code = answer.authorization;
        return P.payments("/api/pay/" + d.app.slug + "/" + slug, {method: "POST",
          headers: {"x-wallet-address": code.ownerWallet,
                    "x-svc-budget-spender": code.spender},
          body: {authorizationCode: code.authorizationCode, idempotencyKey: key,
                 source: "hosted_entry"}});
      })
      .then(function (answer) {
        summary.remaining = answer.remaining;
        describeBudget();
        showPaid(product, answer);
      }, function (error) {
        $("result").textContent = "";
        if (error.code === "AUTHORIZATION_CODE_EXPIRED" ||
            error.code === "AUTHORIZATION_CODE_INVALID") {
          store(SUMMARY, null);  // the summary lapsed: authorize again, then buy
          store(PENDING, slug);
          authorize(false);
          return;
        }
        showFailure(product, error);
      })
      .then(function () { buttons(true); });
  }

  adoptReturnCode();
  $("result").setAttribute("tabindex", "-1");
  Array.prototype.forEach.call(document.querySelectorAll("button.buy"), function (b) {
    b.addEventListener("click", function () { buy(b.getAttribute("data-product"), false); });
  });
  loadSummary().then(function () {
    describeBudget();
    buttons(true);
    var pending = stored(PENDING);
    store(PENDING, null);
    if (pending && summary) { buy(pending, true); }
  });
})();
