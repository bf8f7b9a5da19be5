/* The account page: Global Budget (the ledger's remaining, never the ERC-20 allowance),
 * renew and revoke by signing permits, and - after one gas-free wallet proof - connected
 * apps with unlink, and spend records (spec 4.7, 1.9). */
(function () {
  "use strict";
  var P = window.SvcPortal, d = P.data(), el = P.el;
  var wallet = null, verified = null, budget = null;
  var $ = function (id) { return document.getElementById(id); };
  var STATES = {active: "Active", needs_budget: "Used up: renew to keep paying",
                budget_expired: "Expired: renew to keep paying",
                budget_revoked: "Revoked: renew to pay again"};

  function fail(error) {
    P.show("progress", "");
    P.show("error", P.describe(error));
  }

  function owner() { return (verified && verified.wallet) || (wallet && wallet.address); }

  function renderBudget(next) {
    budget = next;
    var box = $("budget");
    $("budget-actions").hidden = !owner();
    $("revoke").hidden = !(budget && budget.state !== "budget_revoked" &&
                           budget.state !== "budget_expired");
    if (!owner()) { return; }
    if (!budget) {
      P.replace(box, el("p", {}, el("span", {class: "state none", text: "No budget"}),
                        " This wallet has not authorized a budget yet."));
      return;
    }
    P.replace(box, el("dl", {},
      el("dt", {text: "Remaining"}),
      el("dd", {id: "remaining", text: P.usdc(budget.remaining) + " USDC of " +
                                       P.usdc(budget.valueAtomic) + " USDC"}),
      el("dt", {text: "Status"}),
      el("dd", {}, el("span", {class: "state " + budget.state, id: "budget-state",
                               text: STATES[budget.state] || budget.state})),
      el("dt", {text: "Spender"}),
      el("dd", {}, "BudgetSpenderV2 ", el("code", {text: budget.spender})),
      el("dt", {text: budget.state === "budget_revoked" ? "Revoked" : "Expires"}),
      el("dd", {text: P.plainDate(new Date(budget.revokedAt || budget.expiresAt))})));
  }

  function renderVerified() {
    var connected = $("connected"), spend = $("spend");
    if (!verified) { return; }
    $("wallet-status").textContent = "Verified for this browser session: " + verified.wallet;
    var forget = el("button", {type: "button", class: "secondary", id: "forget",
                               text: "Forget verification"});
    forget.addEventListener("click", forgetProof);
    var rows = verified.connections.map(function (c) {
      var unlink = el("button", {type: "button", class: "danger", text: "Unlink",
                                 "aria-label": "Unlink " + c.app.name + " account " +
                                               c.gameAccountLabel});
      unlink.addEventListener("click", function () { unlinkConnection(c); });
      return el("tr", {},
        el("td", {}, el("a", {href: "/" + c.app.slug, text: c.app.name})),
        el("td", {text: c.gameAccountLabel || "—"}),
        el("td", {text: P.plainDate(new Date(c.boundAt))}),
        el("td", {}, unlink));
    });
    P.replace(connected, el("div", {},
      rows.length ? el("table", {id: "connections"},
        el("thead", {}, el("tr", {}, el("th", {text: "App"}), el("th", {text: "Game account"}),
                           el("th", {text: "Since"}), el("th", {text: "Action"}))),
        el("tbody", {}, ...rows))
        : el("p", {text: "No app accounts are bound to this wallet."}),
      forget));
    var records = verified.spend.map(function (r) {
      return el("tr", {},
        el("td", {text: P.plainDate(new Date(r.createdAt))}),
        el("td", {text: r.app.name}), el("td", {text: r.product.name}),
        el("td", {text: P.usdc(r.amountAtomic) + " USDC"}),
        el("td", {text: r.settlementStatus}));
    });
    P.replace(spend, records.length ? el("table", {id: "spend-records"},
      el("thead", {}, el("tr", {}, el("th", {text: "Date"}), el("th", {text: "App"}),
                         el("th", {text: "Product"}), el("th", {text: "Amount"}),
                         el("th", {text: "Settlement"}))),
      el("tbody", {}, ...records)) : el("p", {text: "No spending yet."}));
    renderBudget(verified.budget);
  }

  function adopt(view) {
    verified = view;
    renderVerified();
  }

  function loadWallet() {
    return P.api("/api/portal/wallet?address=" + encodeURIComponent(owner()))
      .then(function (answer) { renderBudget(answer.budget); });
  }

  function connect(kind) {
    P.show("error", "");
    wallet = P.wallet(kind);
    if (!wallet) {
      P.show("error", "No browser wallet was found. Install a wallet that supports " +
        "EIP-1193 (window.ethereum)" + (d.devWallet ? ", or use the dev wallet." : "."));
      return Promise.resolve(null);
    }
    P.show("progress", "Waiting for your wallet…");
    return wallet.connect(d.chainId).then(function (address) {
      if (verified && verified.wallet !== address) {
        verified = null;  // another wallet: its records need their own proof
        window.location.reload();
        return null;
      }
      if (!verified) {
        $("wallet-status").textContent = "Connected: " + address + " (" + wallet.label() + ")";
        $("verify").disabled = false;
      }
      P.show("progress", "");
      return loadWallet();
    }).then(null, fail);
  }

  function verify() {
    P.show("error", "");
    P.show("progress", "Sign the wallet check in your wallet (no payment, no gas)…");
    P.api("/api/portal/wallet-proof/challenge", {method: "POST",
                                                  body: {address: wallet.address}})
      .then(function (challenge) {
        return wallet.personalSign(challenge.message).then(function (signature) {
          return P.api("/api/portal/wallet-proof", {method: "POST",
            body: {challenge: challenge.challenge, signature: signature}});
        });
      }).then(function (view) {
        P.show("progress", "Wallet verified.");
        adopt(view);
      }, fail);
  }

  function needWallet() {
    if (wallet && wallet.address === owner()) { return Promise.resolve(wallet); }
    P.show("error", "Connect the wallet " + owner() + " first: only it can sign for this " +
                    "budget.");
    return Promise.reject(null);
  }

  function signPermit(value, deadline) {
    return P.api("/api/portal/permit?" + new URLSearchParams({
      owner: wallet.address, value: String(value), deadline: String(deadline)}))
      .then(function (answer) {
        var typed = P.checkPermit(answer.typedData, {token: d.token, spender: d.spender,
                                                     owner: wallet.address, value: value,
                                                     deadline: deadline});
        return wallet.signTypedData(typed).then(function (signature) {
          var m = typed.message;
          return {owner: m.owner, value: m.value, nonce: m.nonce, deadline: m.deadline,
                  signature: signature};
        });
      });
  }

  function describeRenew() {
    var amount = P.usdc($("amount").value), days = Number($("days").value);
    $("renew-sentence").textContent = "You sign one USDC permit: BudgetSpenderV2 may take " +
      "up to " + amount + " USDC until " + P.plainDate(new Date(Date.now() + days * 86400000)) +
      ". It replaces your current budget for every app. No gas, no ETH.";
  }

  /* While a permit is prepared and signed, the choice it is made for cannot change (nor can
     a second one start). */
  function lockChoice(on) {
    ["amount", "days", "renew-sign", "revoke"].forEach(function (id) { $(id).disabled = on; });
  }

  function renew(event) {
    event.preventDefault();
    P.show("error", "");
    lockChoice(true);
    needWallet().then(function () {
      P.show("progress", "Sign the new budget permit in your wallet…");
      return signPermit($("amount").value, P.permitDeadline(Number($("days").value)));
    }).then(function (permit) {
      return P.api("/api/portal/budget", {method: "POST", body: {permit: permit}});
    }).then(function (answer) {
      lockChoice(false);
      $("renew-form").hidden = true;
      P.show("progress", "Budget renewed.");
      renderBudget(answer.budget);
    }, function (error) {
      lockChoice(false);
      if (error && error.code === "permit_already_used") {
        loadWallet();  // recorded already (sent twice): show the budget it made
      }
      if (error) { fail(error); }
    });
  }

  /* Revoke = sign Permit(value=0); the API host records it and the relayer sends it. */
  function revoke() {
    P.show("error", "");
    lockChoice(true);
    needWallet().then(function () {
      P.show("progress", "Sign the revoke (a permit of 0 USDC) in your wallet…");
      return signPermit(0, Math.floor(Date.now() / 1000) + 3600);
    }).then(function (permit) {
      return P.payments("/api/authorizations/revoke", {method: "POST", body: {permit: permit}});
    }).then(function () {
      lockChoice(false);
      P.show("progress", "Budget revoked. Apps can no longer charge it.");
      return loadWallet();
    }).then(null, function (error) {
      lockChoice(false);
      if (error) { fail(error); }
    });
  }

  function unlinkConnection(connection) {
    P.show("error", "");
    P.api("/api/portal/connections/" + encodeURIComponent(connection.id) + "/unlink",
          {method: "POST", body: {}, csrf: verified.csrfToken})
      .then(function (view) {
        P.show("progress", "Unlinked " + connection.app.name + ".");
        adopt(view);
      }, fail);
  }

  function forgetProof() {
    P.api("/api/portal/wallet-proof/forget", {method: "POST", body: {},
                                              csrf: verified.csrfToken})
      .then(function () { window.location.reload(); }, fail);
  }

  P.enableWalletButtons(connect);
  $("verify").addEventListener("click", verify);
  $("renew").addEventListener("click", function () {
    $("renew-form").hidden = false;
    describeRenew();
    $("amount").focus();
  });
  $("amount").addEventListener("change", describeRenew);
  $("days").addEventListener("change", describeRenew);
  $("renew-form").addEventListener("submit", renew);
  $("revoke").addEventListener("click", revoke);

  // A proof made earlier in this browser session shows the records straight away.
  P.api("/api/portal/account").then(adopt, function () { /* not verified yet */ });
})();
