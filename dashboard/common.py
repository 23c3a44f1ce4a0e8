"""What every page shares: the store's path, cached read-only queries, tables with a CSV download."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import altair as alt
import duckdb
import pandas as pd
import streamlit as st

from corewarding.results.schema import SchemaError
from corewarding.results.store import StoreBusyError, StoreDamagedError, default_db, reader
from dashboard import queries

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=])")


def plain(value: object) -> str:
    """A value from the store (model output, a run name, a path) for an element that renders markdown (captions,
    titles, labels): every markdown and HTML special character backslash-escaped and line breaks made spaces, so it
    shows as typed and cannot end a code span, open a link or an image, color text or print a fake verdict."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(value).splitlines()))


def db_path() -> Path:
    """The store the dashboard reads: ``$COREWARDING_RESULTS_DB`` (set by ``corewarding dashboard --db``)."""
    return default_db().resolve()


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


_RUN = threading.local()  # the connection of the script run in progress on this thread (see connection_per_run)


@contextmanager
def connection_per_run() -> Iterator[None]:
    """Share one read-only connection among the cache misses of one script run; closed when the run ends.

    Nothing stays open between runs, so an ingest waits at most for one page render.
    """
    stack = ExitStack()

    def open_once(path: str) -> duckdb.DuckDBPyConnection:
        if "con" not in _RUN.__dict__:
            _RUN.con = stack.enter_context(reader(path))
        return _RUN.con  # type: ignore[no-any-return]

    _RUN.open = open_once
    try:
        yield
    finally:
        _RUN.__dict__.pop("con", None)
        _RUN.__dict__.pop("open", None)
        stack.close()


@st.cache_data(max_entries=512, show_spinner=False)
def _cached(path: str, stamp: tuple[int, int], name: str, args: tuple[Any, ...]) -> Any:
    """A query's result for one version of the store file (a new ingest changes the stamp and so the key)."""
    del stamp
    opener = getattr(_RUN, "open", None)
    if opener is not None:
        return getattr(queries, name)(opener(path), *args)
    with reader(path) as con:
        return getattr(queries, name)(con, *args)


def query(name: str, *args: Any) -> Any:
    """Run ``queries.<name>(con, *args)`` on a short-lived read-only connection, cached per store version."""
    path = db_path()
    return _cached(str(path), _stamp(path), name, tuple(_freeze(a) for a in args))


def require_store() -> None:
    """Stop the page with an explanation when there is no readable store."""
    path = db_path()
    if not path.is_file():
        st.info(
            f"No results store at `{path}`. Create one with `corewarding results ingest` "
            "(or `corewarding results synthetic --out preview` for a preview), then reload."
        )
        st.stop()
    try:
        query("verify_store")  # every block read once per version of the store file (the result is cached)
        synthetic = query("synthetic_runs")
    except (SchemaError, StoreBusyError, StoreDamagedError) as exc:
        st.error(str(exc))
        st.stop()
    if synthetic:
        st.warning(f"{synthetic} run(s) in this store are synthetic (`corewarding results synthetic`), not results.")


def table(frame: pd.DataFrame, name: str, **kwargs: Any) -> Any:
    """A sortable table and a button that downloads it as ``name.csv``; returns st.dataframe's result (the
    selection, with ``on_select``)."""
    shown = st.dataframe(frame, hide_index=True, width="stretch", **kwargs)
    st.download_button(
        f"Download {name}.csv",
        frame.to_csv(index=False).encode(),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv-{name}",
    )
    return shown


# One colour per method on every page (Okabe-Ito, which tells them apart under colour blindness, with olive for GT
# where Okabe-Ito has black, invisible on the dark theme): each has at least 2:1 contrast on both themes' backgrounds.
# An ablation takes its method's colour, anything else grey.
METHOD_COLOURS: dict[str, str] = {
    "gt_grpo": "#999933",
    "majority_voting": "#E69F00",
    "self_certainty": "#56B4E9",
    "entropy": "#CC79A7",
    "co_rewarding_1": "#009E73",
    "co_rewarding_2": "#0072B2",
    "co_rewarding_3": "#D55E00",
    "base": "#999999",
}
OTHER_COLOUR = "#999999"


def method_colour(method: str) -> str:
    """The method's colour; ``majority_voting_rephrased`` and other variants take their method's."""
    known = [m for m in METHOD_COLOURS if method == m or method.startswith(m + "_")]
    return METHOD_COLOURS[max(known, key=len)] if known else OTHER_COLOUR


def method_scale(methods: list[str]) -> alt.Scale:
    """An Altair colour scale giving each method (or each label of a method) its fixed colour."""
    return alt.Scale(domain=list(methods), range=[method_colour(m) for m in methods])


def run_choice(
    label: str, options: list[str], key: str, index: int = 0, column: Any = st, alias: str | None = None
) -> str:
    """A run picked from ``options`` (run ids), kept in the URL under ``key``; the URL may also name a cell (under
    ``key`` or ``alias``), which stands for its newest run, so a link to a cell keeps working after it is trained
    again. The URL is only read here, never rewritten, so the browser's back button leaves the page."""
    named = st.query_params.get(key) or (st.query_params.get(alias) if alias else None)
    if named and named not in options and key not in st.session_state:
        newest = query("newest_run_of", named)
        if newest in options:
            st.session_state[key] = newest
    return str(column.selectbox(label, options, index=index, key=key, bind="query-params"))


def stored_runs(minimum: int = 1) -> pd.DataFrame:
    """Every ingested run (``queries.runs``); the page stops with a note when the store holds fewer than ``minimum``."""
    runs: pd.DataFrame = query("runs")
    if len(runs) < minimum:
        st.info("No runs in the store yet." if minimum == 1 else f"This page needs {minimum} runs in the store.")
        st.stop()
    return runs
