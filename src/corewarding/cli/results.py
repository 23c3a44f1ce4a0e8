"""``corewarding results ingest|info|synthetic``, ``corewarding report`` and ``corewarding dashboard``."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

from corewarding import CHECKOUT
from corewarding.eval_rows import PREFERRED_CHECKERS
from corewarding.files import atomic_path
from corewarding.matrix import load_matrix
from corewarding.results.ingest.quality import QualityReportError

DB_HELP = "the DuckDB store (default: $COREWARDING_RESULTS_DB or results/results.duckdb)"
APP = CHECKOUT / "dashboard" / "app.py"


def _db(args: argparse.Namespace) -> Path:
    from corewarding.results.store.store import default_db  # duckdb: imported when used

    return Path(args.db) if args.db else default_db()


def _fail(message: object) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _ingest(args: argparse.Namespace) -> int:
    from corewarding.results.ingest.evaluation import EvalFileError  # duckdb: imported when used
    from corewarding.results.ingest.ingestion import StoreFullError, ingest  # duckdb: imported when used
    from corewarding.results.ingest.released import AuditRecordError  # duckdb: imported when used
    from corewarding.results.ingest.run_folders import RunFolderError  # pandas: imported when used
    from corewarding.results.store.schema import SchemaError  # duckdb: imported when used
    from corewarding.results.store.store import StoreBusyError, StoreDamagedError  # duckdb: imported when used

    errors = (RunFolderError, QualityReportError, EvalFileError, SchemaError, StoreBusyError, StoreDamagedError,
              AuditRecordError)  # fmt: skip

    named = bool(args.runs or args.run_dir or args.data_dir)  # with no source named: runs/ and data/ when they exist
    roots = [Path(p) for p in args.runs or ([] if named else [p for p in [Path("runs")] if p.is_dir()])]
    data = [Path(p) for p in args.data_dir or ([] if named else [p for p in [Path("data")] if p.is_dir()])]
    if args.db is None:  # the real store: a preview's synthetic runs go to their own (results synthetic)
        from corewarding.results.synthetic.preview import synthetic_runs  # duckdb: imported when used

        found = synthetic_runs(roots, [Path(p) for p in args.run_dir])
        if found:
            return _fail(f"{found[0]} is a synthetic run ({len(found)} in all): synthetic runs are not ingested "
                         "into the real store; `results synthetic --out DIR` makes their own, DIR/results.duckdb "
                         "(or name a store with --db)")  # fmt: skip
    try:
        summary = ingest(_db(args), roots, [Path(p) for p in args.run_dir], data, timeout=args.lock_timeout)
    except (*errors, StoreFullError) as exc:
        return _fail(exc)
    print(json.dumps({"db": str(_db(args)), **summary.to_dict()}))
    return 0


def _info(args: argparse.Namespace) -> int:
    """Schema version and row counts; a store that is damaged (every table is read once first, see store.verify),
    truncated or not DuckDB at all is one ``error:`` line and exit 2, never counts read from half a file."""
    import duckdb  # duckdb: imported when used

    from corewarding.results.store.schema import SchemaError  # duckdb: imported when used
    from corewarding.results.store.store import (  # duckdb: imported when used
        StoreBusyError,
        StoreDamagedError,
        first_line,
        reader,
    )

    try:
        with reader(_db(args), check=True) as con:
            version = con.execute("SELECT max(version) FROM schema_version").fetchone()
            tables = [
                r[0] for r in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()
            ]
            counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in tables}
    except SchemaError as exc:
        return _fail(f"{_db(args)}: {exc}")
    except (StoreDamagedError, StoreBusyError) as exc:
        return _fail(exc)
    except duckdb.Error as exc:  # what verify does not read (a view: over a dropped table, a file) cannot be counted
        return _fail(f"{_db(args)}: cannot be read as a results store ({first_line(exc)})")
    print(json.dumps({"db": str(_db(args)), "schema_version": version[0] if version else None, "rows": counts}))
    return 0


def _synthetic(args: argparse.Namespace) -> int:
    from corewarding.results.synthetic import SyntheticSpec, write_result_set  # pandas: imported when used
    from corewarding.results.synthetic.preview import ingest_preview  # duckdb: imported when used

    spec = SyntheticSpec(steps=args.steps, samples_per_benchmark=args.samples)
    cells = list(dict.fromkeys(c for name in args.matrix or ["paper"] for c in load_matrix(name).cells))
    runs, data = write_result_set(Path(args.out), cells, spec)
    db = ingest_preview(Path(args.out))
    print(json.dumps({"runs": str(runs), "data": str(data), "db": str(db)}))
    report = Path(args.out) / "report.html"
    print(f"open the preview (its own store; the real one is untouched):\n  .venv/bin/corewarding dashboard --db {db}"
          f"\n  .venv/bin/corewarding report --db {db} --out {report}", file=sys.stderr)  # fmt: skip
    return 0


def _forget_synthetic(args: argparse.Namespace) -> int:
    from corewarding.results.synthetic.preview import forget_synthetic  # duckdb: imported when used

    db = _db(args)
    if not db.is_file():
        return _fail(f"{db}: no such store")
    print(json.dumps({"db": str(db), **forget_synthetic(db)}))
    return 0


def _report(args: argparse.Namespace) -> int:
    """Write the reproduction report of a matrix as one HTML file (atomically: a reader never sees half of it)."""
    import duckdb  # duckdb: imported when used

    from corewarding.results.report.build import build_report, report_matrix  # duckdb: imported when used
    from corewarding.results.report.collect import ReportError  # duckdb: imported when used
    from corewarding.results.store.schema import SchemaError  # duckdb: imported when used
    from corewarding.results.store.store import StoreBusyError, StoreDamagedError  # duckdb: imported when used

    db = _db(args)
    try:
        matrix = args.matrix or report_matrix(db)
        out = Path(args.out) if args.out else Path("results") / f"report-{matrix}.html"
        text = build_report(db, matrix, args.checker, args.policy)
    except (FileNotFoundError, ReportError, SchemaError, StoreBusyError, StoreDamagedError) as exc:
        return _fail(exc)
    except duckdb.Error as exc:  # e.g. a file that is not a DuckDB database
        return _fail(f"{db}: cannot be read as a results store: {exc}")
    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    print(json.dumps({"db": str(db), "matrix": matrix, "out": str(out), "bytes": len(text.encode())}))
    return 0


def port_in_use(host: str, port: int) -> bool:
    """Whether ``host:port`` cannot be bound now (another server holds it). Streamlit would fail only after its
    start-up, with no word about --port; asked first, the command says so in one line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _dashboard(args: argparse.Namespace) -> int:
    """Serve the dashboard: Streamlit takes over this process (exec), so it never outlives the command's PID."""
    db = _db(args).resolve()
    if not db.is_file():
        return _fail(f"no results store at {db}: run `corewarding results ingest` first")
    if not APP.is_file():
        return _fail(f"{APP} is missing: the dashboard runs from a source checkout (pip install -e .)")
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        args.host,
        "--server.port",
        str(args.port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "viewer",
    ]
    if port_in_use(args.host, args.port):
        return _fail(f"port {args.port} on {args.host} is in use (another dashboard?): pick a free one with --port, "
                     f"e.g. --port {args.port + 1}")  # fmt: skip
    print(f"dashboard on http://{args.host}:{args.port} reading {db} (read-only); Ctrl-C stops it", flush=True)
    sys.stderr.flush()
    # Streamlit replaces this process rather than running as its child: the PID a user or a supervisor holds is the
    # server's own, so SIGTERM, SIGKILL or Ctrl-C on it stop the server; a child would outlive a killed parent.
    os.execve(sys.executable, command, {**os.environ, "COREWARDING_RESULTS_DB": str(db)})


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Add ``results``, ``report`` and ``dashboard`` to the top-level parser."""
    results = sub.add_parser("results", help="the DuckDB results store").add_subparsers(dest="action", required=True)
    ingest = results.add_parser("ingest", help="ingest run folders and data-quality reports (idempotent)")
    ingest.add_argument("--db", default=None, help=DB_HELP)
    ingest.add_argument(
        "--runs",
        action="append",
        help="a folder holding run folders, searched recursively (repeatable). With none of --runs, --run-dir "
        "and --data-dir: runs/ and data/ when they exist",
    )
    ingest.add_argument("--run-dir", action="append", default=[], help="one run folder (repeatable)")
    ingest.add_argument(
        "--data-dir",
        action="append",
        help="where *.quality.json reports live, searched recursively (repeatable)",
    )
    ingest.add_argument(
        "--lock-timeout",
        "--timeout",
        dest="lock_timeout",
        type=float,
        default=300.0,
        help="seconds to wait for another writer's lock before giving up (default: 300)",
    )
    ingest.set_defaults(func=_ingest)
    info = results.add_parser("info", help="schema version and row counts of the store")
    info.add_argument("--db", default=None, help=DB_HELP)
    info.set_defaults(func=_info)
    synthetic = results.add_parser(
        "synthetic", help="a full-matrix preview without training: synthetic runs in a store of their own"
    )
    synthetic.add_argument(
        "--out",
        required=True,
        help="writes OUT/runs/<cell_id>/, OUT/data/<dataset>/ and their store OUT/results.duckdb",
    )
    synthetic.add_argument(
        "--matrix",
        action="append",
        help="the cells of this matrix (default: paper); repeat to add another's, e.g. --matrix paper --matrix "
        "paper_v3_seeds for the headline cells' seeds 1 and 2 (paper_v3_lenders: a seeded row the Qwen3-4B-Base "
        "MATH row borrows from)",
    )
    synthetic.add_argument("--steps", type=int, default=120, help="training steps per synthetic run (default: 120)")
    synthetic.add_argument(
        "--samples", type=int, default=400, help="evaluation samples per run and benchmark (default: 400)"
    )
    synthetic.set_defaults(func=_synthetic)
    forget = results.add_parser("forget-synthetic", help="remove synthetic runs (a preview's) from a store")
    forget.add_argument("--db", default=None, help=DB_HELP)
    forget.set_defaults(func=_forget_synthetic)

    report = sub.add_parser(
        "report", help="write the reproduction report: one self-contained HTML file of paper vs reproduced numbers"
    )
    report.add_argument(
        "--matrix", default=None, help="the matrix whose cells the report covers (default: the stored runs' matrix)"
    )
    report.add_argument("--db", default=None, help=DB_HELP)
    report.add_argument("--out", default=None, help="the HTML file (default: results/report-<matrix>.html)")
    report.add_argument("--checker", default="math_verify", choices=list(PREFERRED_CHECKERS))
    report.add_argument(
        "--policy", default="latest", choices=["latest", "best"], help="which checkpoint of each run is compared"
    )
    report.set_defaults(func=_report)

    dashboard = sub.add_parser("dashboard", help="the Streamlit dashboard over the results store (read-only)")
    dashboard.add_argument("--db", default=None, help=DB_HELP)
    dashboard.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)"
    )
    dashboard.add_argument("--port", type=int, default=8501, help="port to serve on (default: 8501)")
    dashboard.set_defaults(func=_dashboard)
