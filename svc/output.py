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

    def error(self, error: CliError) -> None:
        if self.as_json:
            body: dict[str, Any] = {"code": error.code, "message": error.message,
                                    "exitCode": int(error.exit_code)}
            if error.command:
                body["command"] = error.command
            self._write(self.out, json.dumps({"error": body}, sort_keys=True))
            return
        self._write(self.err, f"svc: {error.message}")
        if error.command and error.command not in error.message:
            self._write(self.err, "Run:")
            self._write(self.err, f"  {error.command}")

    @staticmethod
    def _write(stream: TextIO, line: str) -> None:
        stream.write(line + "\n")
        stream.flush()
