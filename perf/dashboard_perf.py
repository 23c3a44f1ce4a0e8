"""Dashboard performance on a full-size generated store (targets: every page's queries < 150 ms; the run page and the
grouped curves render warm in < 1 s; every page < 2 s).

Generates the 72 runs of paper_v3 x 330 steps x 40 metrics, evaluations at every 10th step, and 72 x 7 benchmarks x
4,000 samples in the real on-disk formats,
ingests them through ``corewarding.results.ingest`` (timed, then a second no-op ingest), times every page's queries
on fresh read-only connections, and renders every page with Streamlit's AppTest with the query cache cleared (cold)
and kept (warm). Usage: ``python perf/dashboard_perf.py [--workdir DIR] [--repeat 5] [--json out.json]``.
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
from corewarding.results import synthetic
from corewarding.results.collapse import collapse_events, detect_collapse
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.store import store
from dashboard import queries

AMC_WRONG = queries.SampleFilter(benchmarks=("AMC",), strict=False)
DISAGREE = queries.SampleFilter(disagree=True)
SPEC = synthetic.SyntheticSpec(steps=330, metrics=40, test_freq=10, eval_every=10, samples_per_benchmark=4000)
SETTINGS = {"base_models": ["qwen2.5-3b", "qwen2.5-7b", "qwen3-1.7b-base", "qwen3-4b-base", "qwen3-8b-base",
                            "llama-3.2-3b-instruct"], "datasets": ["math", "dapo14k", "openrs"]}  # fmt: skip
# page -> (script, URL query parameters of a first visit)
PAGES = {
    "matrix": ("views/matrix.py", {}),
    "paper": ("views/paper.py", {}),
    "curves": ("views/curves.py", {}),
    "grouped": ("views/curves.py", {"group": "method", **SETTINGS}),
    "run": ("views/run.py", {"cell": "co_rewarding_3__qwen3-8b-base__math"}),
    "runs": ("views/runs.py", {}),
    "compare": ("views/compare.py", {}),
    "samples": ("views/samples.py", {}),
    "data": ("views/data.py", {}),
}


def page_queries(db: Path) -> dict[str, list[tuple[str, Callable[[Any], Any]]]]:
    """Each page's queries with the parameters a first visit uses (the defaults of its widgets)."""
    with store.reader(db) as con:
        runs = queries.runs(con)
        chosen = list(runs["run_id"][:3])
        idx = queries.sample_index(con)
        report = queries.quality_reports(con)["report_id"][0]
    run_id, step = idx["run_id"][0], int(idx["step"].max())
    curves = ["val_accuracy", "reward_mean", "label_accuracy", "response_length_mean"]
    every = list(runs["run_id"])
    one = [str(runs.loc[runs["cell_id"] == "co_rewarding_3__qwen3-8b-base__math", "run_id"].iloc[0])]
    a, b = every[:2]

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
            ("collapse_inputs+detect (72 runs)", collapse_all),
        ],
        "grouped": [
            ("runs", queries.runs),
            ("training_curves (72 runs)", lambda c: queries.training_curves(c, every, curves)),
            ("collapse_inputs+detect (72 runs)", collapse_all),
        ],
        "run": [
            ("runs", queries.runs),
            ("newest_run_of", lambda c: queries.newest_run_of(c, "co_rewarding_3__qwen3-8b-base__math")),
            ("run_detail", lambda c: queries.run_detail(c, one[0])),
            ("training_curves", lambda c: queries.training_curves(c, one, curves)),
            ("collapse_inputs+detect", lambda c: detect_collapse(queries.collapse_inputs(c, one), {})),
            ("eval_curves", lambda c: queries.eval_curves(c, one, "math_verify")),
            ("sample_summary", lambda c: queries.sample_summary(c, one[0], SPEC.steps)),
        ],
        "runs": [("runs", queries.runs)],
        "compare": [
            ("runs", queries.runs),
            ("run_detail x2", lambda c: (queries.run_detail(c, a), queries.run_detail(c, b))),
            ("training_curves", lambda c: queries.training_curves(c, [a, b], curves)),
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
    for name, (page, params) in PAGES.items():

        def render(page: str = page, params: dict[str, Any] = params) -> float:
            at = AppTest.from_file(app, default_timeout=120)
            at.switch_page(page)
            for key, value in params.items():
                at.query_params[key] = value
            started = time.perf_counter()
            at.run()
            assert not at.exception, [e.value for e in at.exception]
            return time.perf_counter() - started

        st.cache_data.clear()
        cold = render()
        warm = statistics.median(render() for _ in range(repeat))
        out[name] = {"cold": cold, "warm": warm}
    return out


def build(workdir: Path) -> tuple[Path, dict[str, float]]:
    figures = {}
    started = time.perf_counter()
    runs, data = synthetic.write_result_set(workdir, load_matrix("paper_v3").cells, SPEC, all_finished=True)
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
