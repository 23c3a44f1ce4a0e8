"""The paper page's comparison query with the seed-aware verdicts (target < 300 ms): a synthetic store of paper_v3 and
the headline cells' seeds (paper_v3_seeds: 102 runs), ingested, then ``queries.paper_comparison`` of each of the
paper's tables timed on fresh read-only connections (the dashboard's query cache cleared each time).

Usage: ``python perf/paper_page_perf.py [--repeat 5] [--samples 64] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.ingest.ingestion import ingest
from dashboard import queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=64, help="samples per benchmark and step of each run")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cells = [*load_matrix("paper_v3").cells, *(c for c in load_matrix("paper_v3_seeds").cells if c.seed)]
        spec = synthetic.SyntheticSpec(samples_per_benchmark=args.samples)
        runs, data = synthetic.write_result_set(root, cells, spec, all_finished=True)
        db = root / "results.duckdb"
        ingest(db, [runs, data])
        with duckdb.connect(str(db), read_only=True) as con:
            tables = queries.paper_tables(con)
        timings: dict[str, list[float]] = {}
        for table in tables:
            for _ in range(args.repeat):
                with duckdb.connect(str(db), read_only=True) as con:
                    start = time.perf_counter()
                    frame = queries.paper_comparison(con, table, "math_verify", "latest")
                    timings.setdefault(table, []).append(time.perf_counter() - start)
            print(f"{table}: {len(frame)} rows, median {statistics.median(timings[table]) * 1000:.0f} ms "
                  f"(min {min(timings[table]) * 1000:.0f}, max {max(timings[table]) * 1000:.0f})")  # fmt: skip
        print(
            f"{len(cells)} runs; slowest table's median {max(map(statistics.median, timings.values())) * 1000:.0f} ms"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": len(cells), "seconds": timings}, indent=1))


if __name__ == "__main__":
    main()
