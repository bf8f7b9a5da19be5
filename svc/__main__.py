"""``python -m svc``: the same CLI as the ``svc`` script, e.g. from a source checkout."""

from svc.cli import main

raise SystemExit(main())
