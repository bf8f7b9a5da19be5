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


def check_slug(slug: str) -> str:
    """Return ``slug`` if it may be registered, else raise an :class:`ApiError`."""
    if not is_valid_slug(slug):
        raise ApiError("invalid_slug", 422, f"'{slug}' is not a valid app slug: use 1-63 "
                       "lower-case letters, digits and single hyphens, not at either end.")
    if slug in RESERVED_SLUGS:
        raise ApiError("reserved_slug", 422, f"The slug '{slug}' is reserved by the service; "
                       "choose another name or pass an explicit slug.", slug=slug)
    return slug
