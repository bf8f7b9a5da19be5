"""What can go wrong in a ``svc`` command, and the exit code each outcome maps to."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # the service refused or the sign-in did not complete
    USAGE = 2  # bad flags, a bad svc.toml, input the service rejects as invalid
    SCOPE = 3  # the grant does not cover this: a missing scope or another app
    SIGN_IN = 4  # no grant, or an expired, revoked or unknown one
    NETWORK = 5  # the service could not be reached


class CliError(Exception):
    """Stops a command: ``message`` for people, ``code`` for machines, and an exit code.

    ``command`` is a shell command that fixes the problem, when there is one; ``errors``
    are the service's per-field problems (``{path, code, message}``), when it named them.
    """

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.FAILED, *,
                 code: str = "failed", command: str | None = None,
                 errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.code = code
        self.command = command
        self.errors = errors or []


def usage(message: str) -> CliError:
    return CliError(message, ExitCode.USAGE, code="usage")


def not_signed_in(message: str = "Not signed in.") -> CliError:
    return CliError(f"{message} Run `svc auth browser` (or `svc auth device`) to sign in.",
                    ExitCode.SIGN_IN, code="not_signed_in", command="svc auth browser")


def for_api_failure(status: int, code: str, message: str, command: str | None,
                    errors: list[dict[str, str]] | None = None) -> CliError:
    """The exit code for an error answer of the developer API."""
    failure = _for_api_failure(status, code, message, command)
    failure.errors = errors or []
    return failure


def _for_api_failure(status: int, code: str, message: str, command: str | None) -> CliError:
    if code == "developer_cli_scope_missing":
        # The service names the exact sign-in that adds the scope (spec 5.3 item 3).
        return CliError(message.split(" Run:", 1)[0], ExitCode.SCOPE, code=code,
                        command=command)
    if code in ("developer_cli_app_mismatch", "developer_session_required"):
        # Another app, or an app that does not exist yet: grants cover one existing app.
        return CliError(message, ExitCode.SCOPE, code=code)
    if status == 401:
        return CliError(message, ExitCode.SIGN_IN, code=code, command="svc auth browser")
    if status == 422:
        return CliError(message, ExitCode.USAGE, code=code)
    return CliError(message, ExitCode.FAILED, code=code)
