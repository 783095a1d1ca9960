"""Backbones, reward heads (scalar, A/B selector), LoRA adapters and their state."""
