// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @title TestUSDC
/// @notice A USDC stand-in for the in-process chain and the tests: 6 decimals, EIP-2612
///         permit with the EIP-712 domain (name "Test USDC", version "1", chainId, this
///         address), owner-only mint. Never deployed to a public network.
/// @dev Real USDC signs under version "2" and its own name; the off-chain code takes the
///      domain from settings, not from this contract.
contract TestUSDC is ERC20, ERC20Permit, Ownable {
    constructor(address initialOwner)
        ERC20("Test USDC", "USDC")
        ERC20Permit("Test USDC")
        Ownable(initialOwner)
    {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function mint(address to, uint256 amount) external onlyOwner {
        _mint(to, amount);
    }
}
