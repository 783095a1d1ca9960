"""fedpref's ServerApp with the ClientApp that does all its work in each per-message process."""

from fedpref.engines.flower.client_app import app as client  # noqa: F401
from fedpref.experiments.deployment import app as server  # noqa: F401
