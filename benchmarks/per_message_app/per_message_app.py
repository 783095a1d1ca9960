"""fedpref's ServerApp with the ClientApp that does all its work in each per-message process."""

from fedpref.apps import deployment
from fedpref.engines.flower import client_app

server = deployment.app
client = client_app.app
