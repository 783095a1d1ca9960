"""fedpref: federated, personalized reward modelling of language models."""

__version__ = "0.1.0"
