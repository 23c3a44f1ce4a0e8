"""The results: four wings and the analysis between them.

``store/`` (the DuckDB store, its schema and migrations), ``ingest/`` (what writes rows into it: run folders,
evaluations, quality reports, released audits, pipeline attempts), ``report/`` (the HTML reproduction report of
``corewarding report``) and ``synthetic/`` (synthetic result sets and the preview store built from them). The modules
here read and judge what the store holds: read queries, collapse detection, claims, cell verdicts, seed variance and
calibration, the GPU-hour ledger, benchmark names and the paper's reference numbers.
"""
