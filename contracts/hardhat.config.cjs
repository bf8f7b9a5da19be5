// Hardhat only runs a local JSON-RPC node for tests/chain/test_json_rpc.py; contracts are
// compiled by build.mjs, not by Hardhat.
module.exports = {
  networks: {
    hardhat: { hardfork: "prague", chainId: 31337 },
  },
};
