"""Reports on finished runs: tables, plots, summaries over seeds and groups of runs, their statistics."""
