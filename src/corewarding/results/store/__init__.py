"""Store wing: the DuckDB results store (``store``: where it lives, locked readers and writers) and its schema and
migrations (``schema``)."""
