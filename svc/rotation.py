"""A webhook secret rotation whose answer never arrived (``svc webhook rotate``).

The service replaces the secret at once (no grace period: every request from then on,
retries included, is signed with the new one) and shows the new secret in that one answer
only, as it shows every secret (docs/decisions.md). So a rotation made whose answer was
lost leaves a secret nobody holds, while the receiver's no longer verifies anything. The
command cannot get that secret back; it can say whether the rotation was made, by the
endpoint's ``secretCreatedAt`` and ``secretPreview`` before and after, and that rotating
again is the remedy.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from svc.client import ApiFailure, DeveloperClient, ServiceUnreachable
from svc.errors import CliError, ExitCode


def rotate_again(slug: str) -> str:
    return f"svc webhook rotate --app {slug} --yes"


def if_interrupted(slug: str, before: dict[str, Any]) -> str:
    """What Ctrl-C during the rotation's request adds (svc/sent.py ``noting``): the
    command stops waiting, so whether it was made is for `svc webhook list` to show."""
    old = before["secretPreview"]
    return (f"If it did, the new signing secret was in the answer this command no longer "
            f"awaits and is not shown again, and deliveries are signed with it from then on, "
            f"so the old one ({old}) no longer verifies them: if `svc webhook list` shows "
            f"another secretPreview than {old}, run `{rotate_again(slug)}` again and store "
            f"the secret it prints. If it still shows {old}, nothing changed.")


def after_lost_answer(client: DeveloperClient, slug: str, before: dict[str, Any],
                      lost: ServiceUnreachable | ApiFailure) -> CliError:
    """What the rotation did, read back from the endpoint, when its answer did not come
    (no answer, or a gateway's 5xx)."""
    why = (str(lost).rstrip(".") if isinstance(lost, ServiceUnreachable)
           else f"The rotation was answered with HTTP {lost.status}, not its result "
                f"({lost.message.rstrip('.')})")
    exit_code = ExitCode.NETWORK if isinstance(lost, ServiceUnreachable) else ExitCode.FAILED
    old = before["secretPreview"]
    try:
        hooks = client.call("GET", f"/apps/{quote(slug, safe='')}/webhooks")["webhooks"]
    except (ApiFailure, ServiceUnreachable):
        hooks = None
    now = next((h for h in hooks or [] if h["id"] == before["id"]), None)
    if now is None:
        return CliError(f"{why}. Whether the rotation was made is not known: `svc webhook "
                        f"list --app {slug}` shows the secret's preview. If it is no longer "
                        f"{old}, the rotation was made and its secret, shown only in the "
                        "answer that was lost, cannot be shown again, while the old secret "
                        f"no longer verifies deliveries: run `{rotate_again(slug)}` again. "
                        "If it is, nothing changed.", exit_code, code="webhook_rotation_unknown",
                        command=f"svc webhook list --app {slug}")
    if (now["secretCreatedAt"], now["secretPreview"]) == (before["secretCreatedAt"], old):
        return CliError(f"{why}. The rotation was not made: the secret is still {old}, and "
                        "deliveries are still signed with it. Run the command again.",
                        exit_code, code="webhook_not_rotated", command=rotate_again(slug))
    return CliError(f"{why}. The rotation was made (the secret is now {now['secretPreview']}, "
                    f"made at {now['secretCreatedAt']}), but the answer that carried the new "
                    "secret was lost, and it cannot be shown again. Deliveries are signed "
                    f"with it from then on, so the old secret ({old}) no longer verifies "
                    f"them. Run `{rotate_again(slug)}` again and store the secret it prints; "
                    "deliveries your receiver refused meanwhile are retried on their "
                    "schedule, signed with the secret current then.", ExitCode.FAILED,
                    code="webhook_secret_lost", command=rotate_again(slug))
