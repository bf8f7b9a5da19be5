"""The hosted-app review policy of spec 1.2 rule 4, as data and one decision.

Service-hosted apps (served on ``<slug>.{apps_domain}``) are reviewed by hand before their
hostname is approved; developers on the hosting allowlist are reviewed first. A reviewer
records the categories an app falls into: some are rejected by default and can only be
rejected; others need a written note of the manual review before approval.
"""

from __future__ import annotations

from payments.errors import ApiError

REJECTED_BY_DEFAULT: dict[str, str] = {
    "adult": "adult content",
    "gambling": "gambling or prizes",
    "phishing": "phishing, scams or malware",
    "piracy": "piracy, illegal goods, hate or extreme violence",
    "unlicensed_finance": "unlicensed financial services",
}
EXTRA_REVIEW: dict[str, str] = {
    "ugc": "user-generated content",
    "ai_media": "AI-generated media",
    "random_rewards": "random rewards, contests or tipping",
    "child_targeted": "child-targeted apps",
}
CATEGORIES = {**REJECTED_BY_DEFAULT, **EXTRA_REVIEW}


def check_categories(categories: list[str]) -> list[str]:
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown:
        raise ApiError("unknown_category", 422, f"Unknown review categories: "
                       f"{', '.join(unknown)}. Known: {', '.join(CATEGORIES)}.")
    return sorted(set(categories), key=list(CATEGORIES).index)


def check_approvable(categories: list[str], note: str) -> None:
    """Refuse approval for a rejected-by-default category, or an extra-review one without
    a note saying what the manual review found."""
    rejected = [c for c in categories if c in REJECTED_BY_DEFAULT]
    if rejected:
        names = ", ".join(REJECTED_BY_DEFAULT[c] for c in rejected)
        raise ApiError("review_category_rejected", 409, f"Apps in {names} are rejected by "
                       "default; reject the review instead.")
    extra = [c for c in categories if c in EXTRA_REVIEW]
    if extra and not note.strip():
        names = ", ".join(EXTRA_REVIEW[c] for c in extra)
        raise ApiError("review_note_required", 422, f"{names} need a manual review: approve "
                       "with a note (--note) saying what was checked.")
