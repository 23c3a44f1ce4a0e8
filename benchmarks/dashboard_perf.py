"""Dashboard performance on a full-size generated store (targets: each page's queries < 300 ms, each page < 2 s).

Generates 66 runs x 330 steps x 40 metrics and 66 x 7 benchmarks x 4,000 samples in the real on-disk formats,
ingests them through ``corewarding.results.ingest`` (timed, then a second no-op ingest), times every page's queries
on fresh read-only connections, and renders every page with Streamlit's AppTest with the query cache cleared (cold)
and kept (warm). Usage: ``python benchmarks/dashboard_perf.py [--workdir DIR] [--repeat 5] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corewarding.matrix import load_matrix
from corewarding.results import store, synthetic
from corewarding.results.collapse import collapse_events, detect_collapse
from corewarding.results.ingest import ingest
from dashboard import queries

AMC_WRONG = queries.SampleFilter(benchmarks=("AMC",), strict=False)
DISAGREE = queries.SampleFilter(disagree=True)
SPEC = synthetic.SyntheticSpec(steps=330, metrics=40, test_freq=10, eval_every=30, samples_per_benchmark=4000)


def page_queries(db: Path) -> dict[str, list[tuple[str, Callable[[Any], Any]]]]:
    """Each page's queries with the parameters a first visit uses (the defaults of its widgets)."""
    with store.reader(db) as con:
        runs = queries.runs(con)
        chosen = list(runs["run_id"][:3])
        idx = queries.sample_index(con)
        report = queries.quality_reports(con)["report_id"][0]
    run_id, step = idx["run_id"][0], int(idx["step"].max())
    curves = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]

    def collapse_all(con: Any) -> Any:
        return collapse_events(queries.collapse_inputs(con))

    return {
        "matrix": [
            ("synthetic_runs", queries.synthetic_runs),
            ("latest_runs", queries.latest_runs),
            ("training_metric_by_run", lambda c: queries.training_metric_by_run(c, "val_accuracy")),
            ("eval_metric_by_run", lambda c: queries.eval_metric_by_run(c, "MATH500", "math_verify", "pass@1")),
        ],
        "paper": [
            ("synthetic_runs", queries.synthetic_runs),
            ("paper_tables", queries.paper_tables),
            ("eval_choices", queries.eval_choices),
            ("paper_coverage", queries.paper_coverage),
            ("paper_comparison", lambda c: queries.paper_comparison(c, "Table 1", "math_verify", "latest")),
        ],
        "curves": [
            ("synthetic_runs", queries.synthetic_runs),
            ("runs", queries.runs),
            ("training_metric_names", queries.training_metric_names),
            ("training_curves", lambda c: queries.training_curves(c, chosen, curves)),
            ("collapse_inputs+detect (3 runs)", lambda c: detect_collapse(queries.collapse_inputs(c, chosen), {})),
            ("collapse_inputs+detect (66 runs)", collapse_all),
        ],
        "samples": [
            ("synthetic_runs", queries.synthetic_runs),
            ("sample_index", queries.sample_index),
            ("sample_summary", lambda c: queries.sample_summary(c, run_id, step)),
            ("sample_count", lambda c: queries.sample_count(c, run_id, step)),
            ("samples", lambda c: queries.samples(c, run_id, step, limit=50)),
            ("samples (AMC, wrong)", lambda c: queries.samples(c, run_id, step, AMC_WRONG)),
            ("samples (checkers disagree)", lambda c: queries.samples(c, run_id, step, DISAGREE)),
            ("sample_detail", lambda c: queries.sample_detail(c, run_id, step, "AMC", "amc-0", 0)),
        ],
        "data": [
            ("synthetic_runs", queries.synthetic_runs),
            ("quality_reports", queries.quality_reports),
            ("quality_reasons", lambda c: queries.quality_reasons(c, report)),
            ("quality_rows", lambda c: queries.quality_rows(c, report, "dropped")),
            ("quality_counts", lambda c: queries.quality_counts(c, report)),
        ],
    }


def time_queries(db: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Per page: each query's median seconds over ``repeat`` runs, each on a fresh read-only connection."""
    out: dict[str, dict[str, float]] = {}
    for page, items in page_queries(db).items():
        out[page] = {}
        for name, fn in items:
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                with store.reader(db) as con:
                    fn(con)
                times.append(time.perf_counter() - started)
            out[page][name] = statistics.median(times)
    return out


def time_pages_one_connection(db: Path, repeat: int) -> dict[str, float]:
    """Per page: seconds for all its queries on one read-only connection, as the app runs them (median)."""
    out = {}
    for page, items in page_queries(db).items():
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            with store.reader(db) as con:
                for _, fn in items:
                    fn(con)
            times.append(time.perf_counter() - started)
        out[page] = statistics.median(times)
    return out


def time_pages(db: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Per page: AppTest render seconds, cold (query cache cleared) and warm (median of ``repeat``)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["COREWARDING_RESULTS_DB"] = str(db)
    app = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")
    AppTest.from_file(app, default_timeout=120).run()  # imports (streamlit, altair, pandas) once
    out = {}
    for page in ["views/matrix.py", "views/paper.py", "views/curves.py", "views/samples.py", "views/data.py"]:

        def render(page: str = page) -> float:
            at = AppTest.from_file(app, default_timeout=120)
            at.switch_page(page)
            started = time.perf_counter()
            at.run()
            assert not at.exception, [e.value for e in at.exception]
            return time.perf_counter() - started

        st.cache_data.clear()
        cold = render()
        warm = statistics.median(render() for _ in range(repeat))
        out[page.split("/")[1][:-3]] = {"cold": cold, "warm": warm}
    return out


def build(workdir: Path) -> tuple[Path, dict[str, float]]:
    figures = {}
    started = time.perf_counter()
    runs, data = synthetic.write_result_set(workdir, load_matrix("paper").cells, SPEC, all_finished=True)
    figures["generate_s"] = time.perf_counter() - started
    db = workdir / "results.duckdb"
    started = time.perf_counter()
    first = ingest(db, [runs], data_dirs=[data])
    figures["ingest_s"] = time.perf_counter() - started
    started = time.perf_counter()
    again = ingest(db, [runs], data_dirs=[data])
    figures["reingest_noop_s"] = time.perf_counter() - started
    assert again.rows == {}, again.rows
    figures["rows"] = first.rows  # type: ignore[assignment]
    figures["db_mib"] = db.stat().st_size / 2**20
    return db, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", default=None, help="default: a temporary folder, removed afterwards")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        db, figures = build(workdir)
        print(json.dumps(figures, indent=1))
        qtimes = time_queries(db, args.repeat)
        together = time_pages_one_connection(db, args.repeat)
        ptimes = time_pages(db, args.repeat)
    print(
        f"\n{'page':8} {'queries, 1 conn (ms)':>21} {'sum, conn each (ms)':>20} {'slowest query (conn each)':>42} "
        f"{'render cold (s)':>16} {'render warm (s)':>16}"
    )
    for page, items in qtimes.items():
        slowest = max(items, key=items.__getitem__)
        print(
            f"{page:8} {1000 * together[page]:21.1f} {1000 * sum(items.values()):20.1f} "
            f"{f'{slowest} {1000 * items[slowest]:.1f}':>42} {ptimes[page]['cold']:16.2f} {ptimes[page]['warm']:16.2f}"
        )
    for page, items in qtimes.items():
        print(page, {k: round(1000 * v, 1) for k, v in items.items()})
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"build": figures, "queries_s": qtimes, "page_queries_one_connection_s": together, "pages_s": ptimes},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
