"""The Flower apps: the deployment ServerApp and a local federation of SuperLink and SuperNodes on loopback."""
