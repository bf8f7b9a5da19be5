/* The dev wallet (dev mode only; the pages load this file only then): an EIP-1193
 * provider whose key the dev server holds (one test key per dev server), so a person can
 * click through every flow without a wallet extension. It is not installed as
 * window.ethereum, so a real wallet is never shadowed; pages offer it behind a button
 * labelled as a dev wallet. */
(function () {
  "use strict";
  var address = null;

  function rpcError(code, message) {
    var error = new Error(message);
    error.code = code;
    return error;
  }

  function request(args) {
    var method = args && args.method;
    var portal = window.SvcPortal;
    if (method === "eth_requestAccounts" || method === "eth_accounts") {
      if (address) { return Promise.resolve([address]); }
      return portal.api("/api/portal/dev-wallet/account", {method: "POST",
        body: {}}).then(function (answer) {
        address = answer.address;
        return [address];
      });
    }
    if (method === "eth_chainId") { return Promise.resolve(portal.data().chainId); }
    if (method === "wallet_switchEthereumChain") { return Promise.resolve(null); }
    if (method === "personal_sign" || method === "eth_signTypedData_v4") {
      return portal.api("/api/portal/dev-wallet/sign", {method: "POST",
        body: {method: method, params: args.params}})
        .then(function (answer) { return answer.result; });
    }
    return Promise.reject(rpcError(4200, "The dev wallet does not support " + method + "."));
  }

  window.SvcDevWallet = {isSvcDevWallet: true, request: request};
})();
