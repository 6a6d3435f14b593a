"""Labeling: export chosen prompts to annotators, import their labels back, re-grade stored samples."""
