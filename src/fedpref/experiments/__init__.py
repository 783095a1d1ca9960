"""Orchestration: check a config into a plan, run its methods over a transport, and keep the run folder."""
