"""An amount the service refused, in the terms of the flag that set it.

People type an amount flag in USD (``--price 0.05``) or in atomic units (``--price-atomic
50000``); the service checks one field in atomic units (``priceAtomic``) and its messages
name that field. The CLI's message names the flag typed instead: only the name changes,
and the figures the service quotes are atomic units, so after a USD flag the amount it
was converted to is shown beside them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AmountFlags:
    field: str  # the API's name: amountAtomic, priceAtomic
    usd: str  # the flag in USD: --amount, --price
    atomic: str  # the same in atomic units: --amount-atomic, --price-atomic

    def named(self, message: str, usd: str | None, atomic: str | None,
              amount: int | None) -> str:
        """``message`` about the field with the flag named; ``usd``/``atomic`` are what was
        typed (``None``: not given), ``amount`` the atomic units sent."""
        if atomic is not None:
            return self._renamed(message, self.atomic)
        if usd is None:
            return self._renamed(message, f"{self.usd} USD (or {self.atomic} N)")
        named = self._renamed(message, self.usd)
        if any(c in "0123456789" for c in message):  # the service quotes figures
            named = f"{named.rstrip('.')} (atomic units; {self.usd} {usd} is {amount})."
        return named

    def _renamed(self, message: str, flag: str) -> str:
        return message.replace(f"'{self.field}'", flag).replace(self.field, flag)


ORDER_AMOUNT = AmountFlags("amountAtomic", "--amount", "--amount-atomic")
PRODUCT_PRICE = AmountFlags("priceAtomic", "--price", "--price-atomic")
