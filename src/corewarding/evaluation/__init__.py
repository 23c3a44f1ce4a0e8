"""Evaluation: benchmarks, generation, scoring, metrics, the evaluate command."""
