"""Server algorithms: one module per method of the two papers, with pure sampling and aggregation helpers."""
