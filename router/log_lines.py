"""The one format of the service's log lines, for ``svc-server`` and ``svc-ops`` alike."""

from __future__ import annotations

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
