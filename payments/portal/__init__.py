"""Server-side services of the portal: wallet state, wallet-ownership proofs, the account page."""
