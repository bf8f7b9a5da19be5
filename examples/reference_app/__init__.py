"""The reference developer app (spec 1.4, 4.9, 4.11): copy it to build a paid app.

``create_app(Settings.from_env(os.environ))`` or ``python -m examples.reference_app``.
It uses only the ``svc`` SDK and HTTP, never the service's own packages.
"""

from examples.reference_app.app import create_app
from examples.reference_app.settings import Settings, SettingsError

__all__ = ["Settings", "SettingsError", "create_app"]
