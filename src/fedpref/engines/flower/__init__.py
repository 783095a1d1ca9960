"""The Flower engine: the same round loop as the in-process engine, carried over a Flower Grid."""
