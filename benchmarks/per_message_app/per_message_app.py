"""fedpref's ServerApp with the ClientApp that does all its work in each per-message process."""

from fedpref.engines.flower import client_app
from fedpref.experiments import deployment

server = deployment.app
client = client_app.app
