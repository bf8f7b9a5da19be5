// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {Ownable2Step} from "@openzeppelin/contracts/access/Ownable2Step.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";

/// @title BudgetSpenderV2
/// @notice The spender of the users' EIP-2612 permits. Relayers (the service's hot keys) relay
///         the permits and settle charges; the owner (an operator key) manages the relayers and
///         the recipient allowlist. Revenue moves straight from the user to the allowlisted
///         recipient; this contract never holds tokens.
///
/// @dev Charge id encoding. A charge id is a bytes32; read as a uint256 `n`, its settled flag is
///      bit `n & 0xff` of the storage word `_settledWords[n >> 8]`. Every bytes32 value has
///      exactly one flag, so "a charge id is settled at most once" holds for any id, and it is
///      checked and set per charge in storage, inside the batch as well as across batches.
///      The ledger issues ids as sequential integers (`bytes32(uint256(seq))`), so 256
///      consecutive charges share one storage slot: a batch touches one or two slots and a
///      charge costs about 200 gas of bookkeeping instead of a 22,100 gas fresh slot.
///
///      Calldata layout of {chargeBatch}: `Pair[]`, one entry per (owner, recipient) pair, ABI
///      type `(address owner, address recipient, (bytes32 id, uint256 amount)[] charges)[]`.
///      The charges of a pair are settled with ONE `transferFrom(owner, recipient, sum)`; each
///      charge still gets its own {ChargeSettled} event. A pair appearing twice in a batch is
///      allowed (it just costs a second transfer). Any failure reverts the whole batch.
///
///      Ownership is handed over in two steps (OpenZeppelin's Ownable2Step): `transferOwnership`
///      only names the `pendingOwner`, and the owner changes when that account calls
///      `acceptOwnership`; until then the current owner keeps control and may name another
///      account or cancel with `transferOwnership(address(0))`. A mistyped address, or one
///      whose key nobody holds, can then never become the owner.
contract BudgetSpenderV2 is Ownable2Step {
    /// @notice One charge: its id (see the encoding above) and its amount in token atomic units.
    struct Charge {
        bytes32 id;
        uint256 amount;
    }

    /// @notice The charges one owner pays one recipient in a batch.
    struct Pair {
        address owner;
        address recipient;
        Charge[] charges;
    }

    /// @notice The settlement token (USDC); it must implement EIP-2612 permit.
    IERC20 public immutable token;

    /// @notice Recipients (apps' `pay_to` addresses) that charges may pay.
    mapping(address recipient => bool allowed) public allowedRecipients;

    /// @notice Accounts that may relay permits and settle charges.
    mapping(address relayer => bool allowed) public relayers;

    mapping(uint256 word => uint256 bits) private _settledWords;

    event AllowedRecipientSet(address indexed recipient, bool allowed);
    event RelayerSet(address indexed relayer, bool allowed);
    /// @notice Emitted once for every settled charge: the on-chain proof of that charge.
    event ChargeSettled(
        bytes32 indexed chargeId, address indexed owner, address indexed recipient, uint256 amount
    );

    error ZeroAddress();
    error NotRelayer(address caller);
    error RecipientNotAllowed(address recipient);
    error ChargeAlreadySettled(bytes32 chargeId);
    error EmptyPair(uint256 pairIndex);
    /// @notice The token refused the pair's transfer; `reason` is the token's own revert data
    ///         (e.g. `ERC20InsufficientAllowance` after a revoke).
    error PairTransferFailed(
        uint256 pairIndex, address owner, address recipient, uint256 amount, bytes reason
    );

    modifier onlyRelayer() {
        if (!relayers[msg.sender]) revert NotRelayer(msg.sender);
        _;
    }

    constructor(IERC20 token_, address initialOwner) Ownable(initialOwner) {
        if (address(token_) == address(0)) revert ZeroAddress();
        token = token_;
    }

    function setAllowedRecipient(address recipient, bool allowed) external onlyOwner {
        if (recipient == address(0)) revert ZeroAddress();
        allowedRecipients[recipient] = allowed;
        emit AllowedRecipientSet(recipient, allowed);
    }

    function setRelayer(address relayer, bool allowed) external onlyOwner {
        if (relayer == address(0)) revert ZeroAddress();
        relayers[relayer] = allowed;
        emit RelayerSet(relayer, allowed);
    }

    /// @notice Relays a user's permit whose spender is this contract; `value == 0` revokes.
    function relayPermit(
        address owner,
        uint256 value,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external onlyRelayer {
        IERC20Permit(address(token)).permit(owner, address(this), value, deadline, v, r, s);
    }

    /// @notice True once `chargeId` has been settled.
    function isSettled(bytes32 chargeId) external view returns (bool) {
        uint256 n = uint256(chargeId);
        return _settledWords[n >> 8] & (1 << (n & 0xff)) != 0;
    }

    /// @notice Settles one charge (the batch path is the cheap one).
    function charge(bytes32 chargeId, address owner, address recipient, uint256 amount)
        external
        onlyRelayer
    {
        if (!allowedRecipients[recipient]) revert RecipientNotAllowed(recipient);
        _markSettled(chargeId);
        emit ChargeSettled(chargeId, owner, recipient, amount);
        _pull(0, owner, recipient, amount);
    }

    /// @notice Settles many charges in one transaction; see the calldata layout above.
    function chargeBatch(Pair[] calldata pairs) external onlyRelayer {
        for (uint256 p = 0; p < pairs.length; ++p) {
            Pair calldata pair = pairs[p];
            address owner = pair.owner;
            address recipient = pair.recipient;
            if (!allowedRecipients[recipient]) revert RecipientNotAllowed(recipient);
            Charge[] calldata charges = pair.charges;
            if (charges.length == 0) revert EmptyPair(p);
            uint256 total = 0;
            for (uint256 c = 0; c < charges.length; ++c) {
                bytes32 id = charges[c].id;
                uint256 amount = charges[c].amount;
                _markSettled(id);
                total += amount;
                emit ChargeSettled(id, owner, recipient, amount);
            }
            _pull(p, owner, recipient, total);
        }
    }

    function _markSettled(bytes32 chargeId) private {
        uint256 n = uint256(chargeId);
        uint256 word = n >> 8;
        uint256 bit = 1 << (n & 0xff);
        uint256 bits = _settledWords[word];
        if (bits & bit != 0) revert ChargeAlreadySettled(chargeId);
        _settledWords[word] = bits | bit;
    }

    function _pull(uint256 pairIndex, address owner, address recipient, uint256 amount) private {
        try token.transferFrom(owner, recipient, amount) returns (bool ok) {
            if (!ok) revert PairTransferFailed(pairIndex, owner, recipient, amount, "");
        } catch (bytes memory reason) {
            revert PairTransferFailed(pairIndex, owner, recipient, amount, reason);
        }
    }
}
