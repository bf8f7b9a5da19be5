"""App slugs: generated from the name, DNS-label safe, never a reserved word (spec 1.2)."""

from __future__ import annotations

import re
import unicodedata

from payments.errors import ApiError

RESERVED_SLUGS = frozenset({
    "dev", "docs", "api", "app", "apps", "authorize", "health", "statusz", "supported",
    "verify", "settle", "assets", "admin", "login", "settings", "account",
})

# A slug is one DNS label (it becomes `<slug>.{apps_domain}`): 63 characters at most.
MAX_SLUG_LENGTH = 63
_SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")


def slugify(name: str) -> str:
    """``"Space Blaster 2!"`` -> ``"space-blaster-2"``; accents folded, other characters dropped."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    return slug[:MAX_SLUG_LENGTH].rstrip("-")


def is_valid_slug(slug: str) -> bool:
    return bool(_SLUG_RE.match(slug)) and "--" not in slug


_SHAPE = "1-63 lower-case letters a-z, digits and single hyphens, not at either end"


def check_slug(slug: str) -> str:
    """Return ``slug`` if it may be registered, else raise an :class:`ApiError`."""
    if not is_valid_slug(slug):
        raise ApiError("invalid_slug", 422, f"'{slug}' is not a valid app slug: use {_SHAPE}.")
    if slug in RESERVED_SLUGS:
        raise ApiError("reserved_slug", 422, f"The slug '{slug}' is reserved by the service; "
                       "choose another.", slug=slug)
    return slug


def slug_from_name(name: str) -> str:
    """The slug :func:`slugify` makes of an app's name, if it may be registered.

    The errors speak of the name, which is all the developer typed: an empty slug made of
    "Статистика" or "!!!" would mean nothing to them."""
    slug = slugify(name)
    if not is_valid_slug(slug):
        raise ApiError("invalid_slug", 422, f"Could not make an address from the name "
                       f"'{name}'; choose a slug: {_SHAPE}.")
    if slug in RESERVED_SLUGS:
        raise ApiError("reserved_slug", 422, f"The name '{name}' makes the slug '{slug}', which "
                       "is reserved by the service; choose a slug or another name.", slug=slug)
    return slug
