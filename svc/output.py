"""What commands print: sentences for people, or one JSON object per line with ``--json``.

Every line is flushed at once, so a program reading the CLI through a pipe (an agent, a
test) sees the user code while the CLI is still waiting for approval.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from svc.errors import CliError


class Output:
    def __init__(self, as_json: bool, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def emit(self, payload: dict[str, Any], lines: Iterable[str]) -> None:
        """``payload`` as JSON, or ``lines`` as text."""
        if self.as_json:
            self._write(self.out, json.dumps(payload, sort_keys=True))
        else:
            for line in lines:
                self._write(self.out, line)

    def report(self, payload: dict[str, Any], lines: Iterable[str],
               error: CliError | None = None) -> int:
        """A result that may end in an error: with ``--json`` one object, ``payload`` plus
        ``error``; else ``lines`` on stdout, then the error on stderr. Returns the exit code.
        """
        if self.as_json:
            body = {**payload, "error": error_body(error)} if error else payload
            self._write(self.out, json.dumps(body, sort_keys=True))
        else:
            for line in lines:
                self._write(self.out, line)
            if error:
                self._text_error(error)
        return int(error.exit_code) if error else 0

    def error(self, error: CliError) -> None:
        if self.as_json:
            self._write(self.out, json.dumps({"error": error_body(error)}, sort_keys=True))
        else:
            self._text_error(error)

    def note(self, line: str) -> None:
        """A line for people that is not the result (a notice, a prompt): always stderr, so
        stdout stays the result alone."""
        self._write(self.err, line)

    def _text_error(self, error: CliError) -> None:
        self._write(self.err, f"svc: {error.message}")
        for problem in error.errors:
            self._write(self.err, f"  {problem['path']}: {problem['message']}")
        if error.command and error.command not in error.message:
            self._write(self.err, "Run:")
            self._write(self.err, f"  {error.command}")

    @staticmethod
    def _write(stream: TextIO, line: str) -> None:
        stream.write(line + "\n")
        stream.flush()


def error_body(error: CliError) -> dict[str, Any]:
    """The ``error`` object of ``--json`` output: code, message, exitCode, and the fixing
    command and per-path errors when there are any."""
    body: dict[str, Any] = {"code": error.code, "message": error.message,
                            "exitCode": int(error.exit_code)}
    if error.command:
        body["command"] = error.command
    if error.errors:
        body["errors"] = error.errors
    return body
