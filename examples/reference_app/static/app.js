/* The reference app's page: log in, buy, and the recovery flow of spec 4.9.
 *
 * Nothing here grants anything: every item shown comes from GET /api/inventory, which the
 * server derives from grants it made from signed webhooks, trusted lookups or verified
 * payment proofs (spec 1.4). A purchase is saved in localStorage *before* the portal opens
 * (product slug, optional order id, idempotency key, developer user id, optional connection
 * id, creation time), so a closed tab, a reload or a full-page portal return finishes it:
 *
 *   (2) read the summary of the returned code, (3) refresh the handoff, (4) when the handoff
 *   is ready on the connection the summary and the pending purchase name, charge on the
 *   server (trusted charge); otherwise exchange the summary code and call the product route
 *   (the modal script's wallet.pay), then tell the server (payment-submitted); (5) clear the
 *   pending purchase on success, on a stable error, or when the summary or handoff cannot be
 *   refreshed; keep it when the budget needs renewing, the failure is retryable, or the
 *   service already holds a charge under its key or order (PAID below).
 *
 * Before all of that the server reconciles by key: it asks the service for a delivery paid
 * under the purchase's idempotency key, so a charge whose answer was lost is granted even
 * when the webhook is late and the summary code lapsed. "Nothing was charged" is said only
 * after the service answered that no delivery has the key; when it cannot be asked, the
 * purchase is kept and checked again on the next load.
 *
 * No inline script, no HTML from strings, no secret: the session is a signed token the
 * server issued, sent as a bearer header (the router strips cookies on runtime hosts). */
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("refapp-config").textContent);
  var SESSION_KEY = "refapp:session:" + config.app;
  var PENDING_KEY = "refapp:pending:" + config.app;
  // Spec 4.9 (5) and 7: stable and unrecoverable for the saved intent.
  var STABLE = ["AUTHORIZATION_CODE_CONSUMED", "AUTHORIZATION_CODE_INTENT_MISMATCH",
                "ACCOUNT_CONNECTION_MISMATCH"];
  // Paid already: only this purchase's own key (and order) is ever sent, and the service
  // refuses them this way only when it holds a charge under them (the key paid on the other
  // path or from another wallet; the order paid by a trusted charge whose answer was lost).
  // Never "Not paid" and never a new key: kept, the webhook grants it and the next
  // reconcile by key finds the grant.
  var PAID = ["IDEMPOTENCY_KEY_REUSED", "ORDER_ALREADY_PAID"];
  var RENEWABLE = ["needs_budget", "INSUFFICIENT_BUDGET", "AUTHORIZATION_REVOKED",
                   "AUTHORIZATION_EXPIRED"];
  var RETRYABLE = ["service_unreachable", "service_unavailable", "store_unavailable",
                   "network_error", "rate_limited"];
  // The product does not allow a trusted charge: the product route still can.
  var USE_ROUTE = ["TRUSTED_CHARGE_NOT_ALLOWED", "TRUSTED_CHARGE_OVER_LIMIT",
                   "product_id_unknown", "handoff_not_ready"];

  var $ = function (id) { return document.getElementById(id); };
  var session = readJson(SESSION_KEY);
  var wallet = null;
  var lastCode = null;
  var awaiting = false;  // the portal is open for a purchase
  var running = null;    // the recovery under way, so two never overlap

  function readJson(key) {
    try { return JSON.parse(window.localStorage.getItem(key) || "null"); } catch (e) { return null; }
  }

  function Failure(status, body) {
    this.status = status;
    this.body = body || {};
    this.code = this.body.code || (status ? "http_" + status : "network_error");
    this.message = this.body.message || (status ? "HTTP " + status : "The server could not be reached.");
    this.retryable = this.body.retryable === true;
    this.budgetState = this.body.budgetState || null;
  }

  function request(url, body, headers) {
    var init = {method: body === undefined ? "GET" : "POST", cache: "no-store",
                credentials: "same-origin", headers: Object.assign({}, headers || {})};
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(url, init).then(function (response) {
      return response.text().then(function (text) {
        var parsed = null;
        try { parsed = text ? JSON.parse(text) : null; } catch (e) { parsed = null; }
        if (!response.ok) { throw new Failure(response.status, parsed); }
        return parsed;
      });
    }, function () { throw new Failure(0, null); });
  }

  /* Our own server, as the logged-in player. */
  function api(path, body) {
    return request(path, body, session ? {authorization: "Bearer " + session.token} : {});
  }

  /* What to do with the pending purchase after this failure. */
  function classify(error) {
    var code = error.code;
    if (STABLE.indexOf(code) >= 0) { return "stable"; }
    if (RENEWABLE.indexOf(code) >= 0 || error.budgetState || error.status === 402) { return "renew"; }
    if (error.status === 0 || error.status >= 500 || error.status === 429 || error.retryable ||
        RETRYABLE.indexOf(code) >= 0) {
      return "retry";
    }
    if (USE_ROUTE.indexOf(code) >= 0) { return "route"; }
    return "failed";
  }

  // -- the pending purchase ---------------------------------------------------------------

  function readPending() {
    var pending = readJson(PENDING_KEY);
    return pending && typeof pending === "object" && pending.idempotencyKey ? pending : null;
  }

  function savePending(pending) {
    window.localStorage.setItem(PENDING_KEY, JSON.stringify(pending));
    document.body.setAttribute("data-pending", pending.idempotencyKey);
  }

  function clearPending() {
    window.localStorage.removeItem(PENDING_KEY);
    document.body.setAttribute("data-pending", "");
  }

  function say(text, outcome) {
    $("outcome").textContent = text;
    if (outcome) { document.body.setAttribute("data-outcome", outcome); }
  }

  function nameOf(slug) {
    var button = document.querySelector("button.buy[data-product='" + slug + "']");
    return button ? button.getAttribute("data-name") : slug;
  }

  /* (5): success, stable errors and stale state clear; renewable and retryable keep (and a
   * paid purchase waiting for settlement, which the next reconcile finishes, and one whose
   * charge could not be checked yet). */
  function settle(pending, outcome, text) {
    if (outcome === "renew" || outcome === "retry" || outcome === "waiting" ||
        outcome === "checking") {
      savePending(pending);
    } else {
      clearPending();
    }
    say(text, outcome);
    if (outcome === "renew") { wallet.sync(); }
    return refreshInventory().then(function () { return outcome; });
  }

  // -- buying ---------------------------------------------------------------------------

  function buy(slug) {
    if (running) { return running; }
    say("Starting the purchase of " + nameOf(slug) + "...", "working");
    running = api("/api/svc/purchase", {productSlug: slug}).then(function (started) {
      var purchase = started.purchase;
      return api("/api/svc/account-handoff", {}).then(function (handoff) {
        var pending = {productSlug: purchase.productSlug, orderId: purchase.orderId || null,
                       idempotencyKey: purchase.idempotencyKey,
                       developerUserId: purchase.developerUserId,
                       connectionId: handoff.connection ? handoff.connection.id : null,
                       createdAt: purchase.createdAt};
        savePending(pending);  // before the portal opens, whatever happens next
        if (handoff.status === "ready") { return finish(pending, handoff, true); }
        return openPortal(handoff);
      });
    }).catch(function (error) {
      say("Could not start the purchase: " + error.message + " (" + error.code + ")", "failed");
    }).then(function (result) { running = null; return result; });
    return running;
  }

  function openPortal(handoff) {
    awaiting = true;
    say("Authorize payment in the portal to finish the purchase.", "portal");
    wallet.openPortal(handoff.handoff.portalUrl);
    return "portal";
  }

  /* After a portal return, a reload or a reopened tab. */
  function recover(pending) {
    if (running) { return running; }
    running = finish(pending, null, false).then(function (result) {
      running = null;
      return result;
    }, function (error) { running = null; throw error; });
    return running;
  }

  function finish(pending, freshHandoff, interactive) {
    var title = nameOf(pending.productSlug);
    if (!session || pending.developerUserId !== session.player.developerUserId) {
      return settle(pending, "stale", "A pending purchase of another player was dropped.");
    }
    say("Finishing the purchase of " + title + "...", "working");
    // Charged already? Granted (the webhook came first, the tab closed after paying), or
    // found by key on the service and granted now (the answer was lost, the webhook late).
    return api("/api/svc/reconcile", {idempotencyKey: pending.idempotencyKey,
                                      deliveryId: pending.deliveryId || undefined})
      .then(function (known) {
        if (known.status === "granted") {
          return settle(pending, "success", "Purchased " + title + ". It is in your inventory.");
        }
        // Only the service's "no delivery under this key" lets the page say "not charged".
        var uncharged = known.status === "not_charged";
        return readSummary(pending).then(function (summary) {
          if (summary === false) {
            return drop(pending, uncharged, "The portal return could not be read again (the " +
                        "code lapsed). Nothing was charged for it; buy again.");
          }
          var handoff = freshHandoff ? Promise.resolve(freshHandoff)
                                     : api("/api/svc/account-handoff", {});
          return handoff.then(function (current) {
            return charge(pending, summary, current, interactive, uncharged);
          }, function (error) {
            if (classify(error) === "retry") { throw error; }
            return drop(pending, uncharged, "The payment account could not be refreshed (" +
                        error.code + "). Nothing was charged for it; buy again.");
          });
        });
      }, function (error) { return unchecked(pending, error); })
      .catch(function (error) {
        if (PAID.indexOf(error.code) >= 0) {
          return settle(pending, "waiting", "This purchase of " + title + " was already " +
                        "charged (" + error.code + "); it is not charged again and is " +
                        "granted when the service confirms it.");
        }
        var kind = classify(error);
        if (kind === "renew") {
          return settle(pending, "renew", "Your budget needs renewing (" + error.code + "). " +
                        "Renew it and the purchase of " + title + " finishes.");
        }
        if (kind === "retry") {
          return settle(pending, "retry", "Could not finish the purchase of " + title + " yet (" +
                        error.code + "). It is kept and retried when you come back.");
        }
        return settle(pending, kind === "stable" ? "stable" : "failed",
                      "Not paid: " + error.message + " (" + error.code + ")");
      });
  }

  /* The reconcile could not say whether this purchase was charged: never "Not paid". A
   * delivery that waits for settlement is paid; anything else (the service or the store
   * unreachable, the key not allowed to look) leaves the question open. */
  function unchecked(pending, error) {
    var title = nameOf(pending.productSlug);
    if (error.code === "delivery_not_ready") {
      if (error.body.deliveryId) { pending.deliveryId = error.body.deliveryId; }
      return settle(pending, "waiting", "Paid for " + title + ". It is granted when the " +
                    "payment settles on chain.");
    }
    return settle(pending, "checking", "Checking whether the purchase of " + title + " was " +
                  "charged (" + error.code + "). It is kept and checked again when you come " +
                  "back; do not buy it again meanwhile.");
  }

  /* Give up on a purchase that cannot be finished: cleared only when the service said
   * nothing was charged under its key, else kept to be checked again. */
  function drop(pending, uncharged, text) {
    if (!uncharged) {
      return unchecked(pending, {code: "not_confirmed", body: {}});
    }
    return settle(pending, "stale", text);
  }

  /* (2) The summary of the code this tab holds: null without one, false if it lapsed. */
  function readSummary(pending) {
    var code = wallet.code();
    if (!code) { return Promise.resolve(null); }
    return request(wallet.baseUrl + "/api/authorizations/summary?code=" + encodeURIComponent(code))
      .then(function (summary) {
        if (summary.accountConnectionId && !pending.connectionId) {
          pending.connectionId = summary.accountConnectionId;  // for a reopened tab
          savePending(pending);
        }
        return summary;
      }, function (error) {
        if (classify(error) === "retry") { throw error; }
        return false;
      });
  }

  /* (4) Trusted charge on the expected connection, else the product route. */
  function charge(pending, summary, handoff, interactive, uncharged) {
    var title = nameOf(pending.productSlug);
    var connection = handoff.connection ? handoff.connection.id : null;
    var expected = [summary && summary.accountConnectionId, pending.connectionId]
      .filter(function (id) { return !!id; });
    var onConnection = handoff.status === "ready" && connection && expected.length > 0 &&
      expected.every(function (id) { return id === connection; });
    var first = onConnection ? api("/api/svc/trusted-charge", {
      productSlug: pending.productSlug, idempotencyKey: pending.idempotencyKey,
      accountConnectionId: connection, orderId: pending.orderId || undefined
    }).then(function (charged) {
      if (charged.status === "pending") {  // a settled_first product: granted on settlement
        pending.deliveryId = charged.deliveryId;
        return settle(pending, "waiting", "Paid for " + title + ". It is granted when the " +
                      "payment settles on chain.");
      }
      return settle(pending, "success", "Purchased " + title + " (charged on the server). " +
                    "It is in your inventory.");
    }, function (error) {
      if (classify(error) !== "route") { throw error; }
      return null;
    }) : Promise.resolve(null);
    return first.then(function (done) {
      if (done) { return done; }
      if (!summary) {
        if (interactive) { return openPortal(handoff); }
        return drop(pending, uncharged, "No portal return to finish this purchase with. " +
                    "Nothing was charged for it; buy again.");
      }
      return payThroughRoute(pending, summary);
    });
  }

  function payThroughRoute(pending, summary) {
    var title = nameOf(pending.productSlug);
    var options = {developerUserId: pending.developerUserId,
                   idempotencyKey: pending.idempotencyKey};
    if (pending.orderId) { options.orderId = pending.orderId; }
    // A code bound to an account connection is used for the connection this purchase was
    // started for: one of another connection is refused (ACCOUNT_CONNECTION_MISMATCH)
    // rather than paid from an account not meant. A plain authorization has none.
    var connection = summary.accountConnectionId
      ? (pending.connectionId || summary.accountConnectionId) : null;
    if (connection) { options.accountConnectionId = connection; }
    return wallet.sync().then(function () {
      return wallet.pay(pending.productSlug, options);
    }).then(function (paid) {
      pending.deliveryId = paid.deliveryId;  // paid: from now on only the grant is missing
      savePending(pending);
      return api("/api/svc/payment-submitted", {deliveryId: paid.deliveryId});
    }).then(function () {
      return settle(pending, "success", "Purchased " + title + ". It is in your inventory.");
    });
  }

  // -- inventory, login --------------------------------------------------------------------

  function refreshInventory() {
    if (!session) { return Promise.resolve(); }
    return api("/api/inventory").then(showInventory, function (error) {
      if (error.status === 401) { logOut(); }
    });
  }

  function showInventory(answer) {
    var list = $("inventory");
    list.replaceChildren();
    answer.items.forEach(function (item) {
      var row = document.createElement("li");
      row.setAttribute("data-product", item.productSlug || item.productId);
      row.setAttribute("data-count", String(item.count));
      row.textContent = item.name + " × " + item.count;
      list.appendChild(row);
    });
    $("inventory-empty").hidden = answer.items.length > 0;
  }

  function logIn(name) {
    return request("/api/session", {name: name}).then(function (answer) {
      session = {token: answer.token, player: answer.player};
      window.localStorage.setItem(SESSION_KEY, JSON.stringify(session));
      showPlayer();
      return wallet.setGameAccount(session.player.name);
    }, function (error) { $("login-error").textContent = error.message; });
  }

  function logOut() {
    session = null;
    window.localStorage.removeItem(SESSION_KEY);
    showPlayer();
    wallet.setGameAccount(null);
  }

  function showPlayer() {
    $("login-panel").hidden = !!session;
    $("player-panel").hidden = !session;
    $("player-name-shown").textContent = session ? session.player.name : "";
    if (session) { refreshInventory(); }
  }

  // -- wiring ------------------------------------------------------------------------------

  wallet = window.SvcWallet.mount($("wallet"), {
    app: config.app, gameAccount: session ? session.player.name : null,
    onLogin: function () { $("player-name").focus(); }});
  window.refApp = {wallet: wallet, buy: buy, recover: recover, readPending: readPending};
  lastCode = wallet.code();
  // A portal return (the modal stored a new summary code), or the portal closed without one.
  wallet.on(function (state) {
    if (state === "opening_portal" || state === "checking") { return; }
    var code = wallet.code();
    var pending = readPending();
    if (code && code !== lastCode) {
      lastCode = code;
      awaiting = false;
      if (pending && session) { recover(pending); }
    } else if (awaiting) {
      awaiting = false;
      if (pending) { settle(pending, "cancelled", "The portal was closed; nothing was charged."); }
    }
  });

  $("login-form").addEventListener("submit", function (event) {
    event.preventDefault();
    logIn($("player-name").value.trim());
  });
  $("logout").addEventListener("click", logOut);
  $("sync").addEventListener("click", function () {
    api("/api/inventory/sync", {}).then(showInventory, function (error) {
      say("Sync failed: " + error.message, "failed");
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("button.buy"), function (button) {
    button.addEventListener("click", function () { buy(button.getAttribute("data-product")); });
  });

  showPlayer();
  var pending = readPending();
  document.body.setAttribute("data-pending", pending ? pending.idempotencyKey : "");
  if (session && pending) { recover(pending); }  // a reload, a reopened tab, a full-page return
  document.body.setAttribute("data-ready", "1");
})();
