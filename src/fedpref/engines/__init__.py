"""Engines own the round loop and carry an algorithm's tasks to clients."""
