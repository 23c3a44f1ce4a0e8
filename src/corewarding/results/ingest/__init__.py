"""Ingest wing: what writes rows into the results store (runs, evaluations, quality, attempts, ledger)."""
