"""A command whose reader went away (``svc product list | head``) ends quietly.

Python ignores SIGPIPE, so a write to a closed pipe raises ``BrokenPipeError``, and the
flush at interpreter exit reports it again as a traceback on stderr. The reader has what it
wanted; the command's work was done, or stopped at a write that changed nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

# What a shell reports for a command killed by SIGPIPE (128 + 13), as `git log | head` does.
READER_GONE = 141


def finished(command: Callable[[], int]) -> int:
    """``command``'s exit code, its output flushed; READER_GONE if stdout's reader left."""
    try:
        try:
            return command()
        finally:  # --help's SystemExit too: its text is still in the buffer
            sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so that the flush at exit finds nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return READER_GONE
