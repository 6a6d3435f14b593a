"""Pure curation logic (no I/O): grading, prompt scores, budgets, selection strategies, forecasts."""
