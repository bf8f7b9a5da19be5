/* The authorize page: connect a wallet, sign one USDC Permit for BudgetSpenderV2 (or, for
 * a wallet that already has a budget, a gas-free owner proof), get the return code from
 * the payment API and go back to the app (spec 4.6, 4.7). */
(function () {
  "use strict";
  var P = window.SvcPortal, d = P.data();
  var wallet = null, state = null;
  var $ = function (id) { return document.getElementById(id); };

  /* While a step runs nothing can be started again, and the amount and expiry the permit
     is being made for cannot change under it (the sentence shown follows them). */
  function busy(on) {
    ["connect", "dev-wallet", "sign", "use-existing", "new-budget", "amount", "days"]
      .forEach(function (id) { if ($(id)) { $(id).disabled = on; } });
  }

  function fail(error) {
    busy(false);
    P.show("progress", "");
    P.show("error", P.describe(error));
  }

  function describePlain() {
    var amount = P.usdc($("amount").value), days = Number($("days").value);
    var until = P.plainDate(new Date(Date.now() + days * 86400000));
    $("plain-amount").textContent = "up to " + amount + " USDC";
    $("plain-expiry").textContent = "on " + until + " (in " + days + " days)";
    $("plain-sentence").textContent = "You sign one USDC permit. It lets the BudgetSpenderV2 " +
      "contract take up to " + amount + " USDC from this wallet until " + until + ", only for " +
      "purchases you make in " + d.app.name + " and other apps you connect. You pay no gas " +
      "and need no ETH; each purchase is charged without asking again. You can revoke it at " +
      "any time on your account page.";
  }

  function connect(kind) {
    P.show("error", "");
    wallet = P.wallet(kind);
    if (!wallet) {
      P.show("error", "No browser wallet was found. Install a wallet that supports " +
        "EIP-1193 (window.ethereum)" + (d.devWallet ? ", or use the dev wallet." : "."));
      return;
    }
    busy(true);
    P.show("progress", "Waiting for your wallet…");
    wallet.connect(d.chainId).then(function (address) {
      $("connect").parentNode.hidden = true;
      $("wallet-status").textContent = "Connected: " + address + " (" + wallet.label() + ")";
      if (d.walletHint && d.walletHint.toLowerCase() !== address) {
        $("wallet-status").textContent += ". The app expected " + d.walletHint +
          "; you can still continue with this wallet.";
      }
      return P.api("/api/portal/wallet?address=" + encodeURIComponent(address));
    }).then(function (answer) {
      state = answer;
      busy(false);
      P.show("progress", "");
      showBudgetStep();
    }, fail);
  }

  /* The cached active-authorization shortcut: skipped for renew=1 / forceAuthorize=1. */
  function showBudgetStep() {
    $("budget-step").hidden = false;
    var budget = state.budget;
    var usable = budget && budget.state === "active" && !d.force;
    $("existing").hidden = !usable;
    $("budget-form").hidden = usable;
    if (usable) {
      $("existing-text").textContent = "This wallet already has a budget: " +
        P.usdc(budget.remaining) + " USDC left until " +
        P.plainDate(new Date(budget.expiresAt)) + ". Continue with it by signing a " +
        "gas-free check that the wallet is yours; it is not a payment.";
      $("use-existing").focus();
    } else {
      $("amount").focus();
    }
  }

  function finish(answer) {
    P.show("progress", "Authorized. Returning to " + d.app.name + "…");
    window.location.assign(answer.redirectUrl);
  }

  function returnCode(body) {
    body.app = d.app.slug;
    body.returnUrl = d.returnUrl;
    if (d.handoff) { body.handoff = d.handoff; }
    return P.payments("/api/authorizations/return-code", {method: "POST", body: body});
  }

  function signPermit(event) {
    event.preventDefault();
    P.show("error", "");
    busy(true);
    var value = $("amount").value;
    var deadline = P.permitDeadline(Number($("days").value));
    P.show("progress", "Preparing the permit…");
    P.api("/api/portal/permit?" + new URLSearchParams({owner: wallet.address, value: value,
                                                         deadline: String(deadline)}))
      .then(function (answer) {
        var typed = P.checkPermit(answer.typedData, {token: d.token, spender: d.spender,
                                                     owner: wallet.address, value: value,
                                                     deadline: deadline});
        P.show("progress", "Sign the permit in your wallet…");
        return wallet.signTypedData(typed).then(function (signature) {
          P.show("progress", "Recording your budget…");
          var m = typed.message;
          return returnCode({permit: {owner: m.owner, value: m.value, nonce: m.nonce,
                                      deadline: m.deadline, signature: signature}});
        });
      }).then(finish, function (error) {
        if (error && error.code === "permit_already_used") {
          // Recorded already (sent twice): a permit counts once, so offer the budget it
          // made, reached with the gas-free wallet check.
          return P.api("/api/portal/wallet?address=" + encodeURIComponent(wallet.address))
            .then(function (answer) {
              state = answer;
              d.force = false;
              showBudgetStep();
              fail(error);
            }, fail);
        }
        fail(error);
      });
  }

  function useExisting() {
    P.show("error", "");
    busy(true);
    P.show("progress", "Preparing the wallet check…");
    var query = {owner: wallet.address, app: d.app.slug, returnUrl: d.returnUrl};
    // An account link is part of what the check does, so its text names the game account.
    if (d.handoff) { query.handoff = d.handoff; }
    P.api("/api/portal/owner-proof?" + new URLSearchParams(query))
      .then(function (proof) {
        P.show("progress", "Sign the wallet check in your wallet…");
        return wallet.personalSign(proof.text).then(function (signature) {
          return returnCode({ownerProof: {owner: wallet.address,
                                          authorizationId: proof.authorizationId,
                                          issuedAt: proof.issuedAt, signature: signature}});
        });
      }).then(finish, function (error) {
        if (error && error.code === "needs_budget") {  // spent meanwhile: a new permit then
          state.budget = null;
          showBudgetStep();
        }
        fail(error);
      });
  }

  P.enableWalletButtons(connect);
  $("amount").addEventListener("change", describePlain);
  $("days").addEventListener("change", describePlain);
  $("budget-form").addEventListener("submit", signPermit);
  $("use-existing").addEventListener("click", useExisting);
  $("new-budget").addEventListener("click", function () {
    $("existing").hidden = true;
    $("budget-form").hidden = false;
    $("amount").focus();
  });
  if ($("cancel")) {
    // Embedded in the app's modal: tell exactly the app's runtime origin to close it.
    $("cancel").addEventListener("click", function () {
      window.parent.postMessage({type: "svc:authorize-cancel", app: d.app.slug}, d.audience);
    });
    $("cancel").disabled = false;
  }
  describePlain();
})();
