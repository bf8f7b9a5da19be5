"""Portal pages (hosted entry, authorize, account) and their legacy redirects."""
