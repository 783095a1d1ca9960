"""Experiment runner, result files, tables and plots."""
