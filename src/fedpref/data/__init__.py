"""Preference pairs, client splits, the synthetic benchmark and real-data loaders."""
