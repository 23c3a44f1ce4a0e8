"""What every page shares: the store's path, cached read-only queries, tables with a CSV download."""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NoReturn

import altair as alt
import duckdb
import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException

from corewarding import methods
from corewarding.results.store.schema import SchemaError
from corewarding.results.store.store import StoreBusyError, StoreDamagedError, default_db, reader
from dashboard import queries
from dashboard.config_diff import ABSENT

log = logging.getLogger(__name__)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=])")


# Characters that show nothing or reorder what follows: format (bidi controls U+202A-U+202E and U+2066-U+2069,
# zero-width U+200B-U+200F, U+FEFF, ...), control, private use, surrogate, line and paragraph separators.
_UNSEEN = frozenset({"Cf", "Cc", "Co", "Cs", "Zl", "Zp"})


def visible(text: str, multiline: bool = False, blank: str | None = None) -> str:
    """``text`` with every character that shows nothing or reorders the text around it written as its code point,
    ``<U+202E>`` (or as ``blank``, for a file name): an id or model output is shown as what it holds (``multiline``:
    newlines and tabs are kept)."""
    if text.isprintable():  # none of those characters is printable: most text is returned as it is
        return text
    kept = "\n\t" if multiline else ""
    return "".join(
        (f"<U+{ord(c):04X}>" if blank is None else blank) if c not in kept and unicodedata.category(c) in _UNSEEN else c
        for c in text
    )


def visible_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` for display, every text value and column name through ``visible``."""
    out = frame.copy()
    out.columns = [visible(c) if isinstance(c, str) else c for c in frame.columns]
    for i in range(out.shape[1]):  # by position: two columns may share a name
        column = out.iloc[:, i]
        if pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column):
            out.isetitem(i, column.map(lambda v: visible(v) if isinstance(v, str) else v))
    return out


def visible_tree(value: Any) -> Any:
    """A parsed JSON value (a run's config) for display: every string in it, keys too, through ``visible``."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible_tree(k): visible_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [visible_tree(v) for v in value]
    return value


def plain(value: object) -> str:
    """A value from the store (model output, a run name, a path) for an element that renders markdown (captions,
    titles, labels): line breaks made spaces, unseen characters made visible (``visible``), and every markdown and
    HTML special character backslash-escaped, so it shows as typed and cannot end a code span, open a link or an
    image, color text, reorder itself or print a fake verdict."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", visible(" ".join(str(value).splitlines())))


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
            "(or a preview in a store of its own: `corewarding results synthetic --out /tmp/preview`, then "
            "`corewarding dashboard --db /tmp/preview/results.duckdb`), then reload."
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
    shown = st.dataframe(visible_frame(frame), hide_index=True, width="stretch", placeholder=ABSENT, **kwargs)
    st.download_button(
        f"Download {visible(name)}.csv",
        frame.to_csv(index=False).encode(),
        file_name=f"{visible(name, blank='_')}.csv",  # U+202E in a file name reverses, on screen, what follows it
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


UNITS_HELP = "; ".join(f"{unit}: {meaning}" for unit, meaning in methods.REWARD_UNITS.items())


def method_scale(methods: list[str]) -> alt.Scale:
    """An Altair colour scale giving each method (or each label of a method) its fixed colour."""
    return alt.Scale(domain=list(methods), range=[method_colour(m) for m in methods])


def resolve_run(name: str, options: Sequence[str]) -> str | None:
    """The run a URL names: a stored run id itself, a cell id its newest run (so a link to a cell keeps working after
    the cell is trained again); None when the store holds neither."""
    if name in options:
        return name
    newest = query("newest_run_of", name)
    return str(newest) if newest in options else None


def stop_unknown(names: Sequence[str]) -> NoReturn:
    """One clear message naming what the URL asked for (escaped: it is typed by whoever wrote the link), and stop:
    never another run in its place."""
    listed = ", ".join(plain(n) for n in names)
    st.error(
        f"No run or cell {listed} in this store ({plain(db_path())}). Pick a run on the Runs page, or check the link."
    )
    st.stop()


def _write_url(key: str, value: str | list[str], drop: Sequence[str] = ()) -> None:
    """Make ``key=value`` the URL's choice, dropping the other names it could have come from (``cell=``, ``a=``).

    Left unwritten for one render when a widget of the page just left still holds ``key`` (the Samples page binds
    ``run`` to its picker; Streamlit releases it when that render ends), rather than failing the page.
    """
    try:
        if any(name in st.query_params for name in drop):
            _replace_url(key, value, drop)
        elif st.query_params.get_all(key) != ([value] if isinstance(value, str) else value):
            st.query_params[key] = value
    except StreamlitAPIException:
        log.info("%s= is still bound to the previous page's widget; not written this render", key)


def _replace_url(key: str, value: str | list[str], drop: Sequence[str]) -> None:
    """``key=value`` in place of the ``drop`` parameters as one address change (one browser history entry), the other
    parameters kept; where a widget owns one of those (its value can only change through the widget), in two."""
    kept: dict[str, str | list[str]] = {k: st.query_params.get_all(k) for k in st.query_params if k not in drop}
    try:
        st.query_params.from_dict({**kept, key: value})
    except StreamlitAPIException:  # from_dict restored the parameters as they were
        for name in drop:
            if name in st.query_params:
                del st.query_params[name]
        st.query_params[key] = value


def _picked_to_url(key: str, drop: tuple[str, ...]) -> None:
    """on_change of a run picker: the pick goes into the URL under ``key`` (a list: one parameter a run, or an empty
    one for none, so a reload keeps the empty pick instead of the default)."""
    value = st.session_state[key]
    if isinstance(value, list):
        _write_url(key, [str(v) for v in value] or "", drop)
    else:
        _write_url(key, str(value), drop)


def run_choice(label: str, options: list[str], key: str, alias: str | None = None, column: Any = st) -> str:
    """A run picked from ``options`` (run ids, newest first), its choice in the URL under ``key``.

    The URL may name a run or a cell (under ``key`` or ``alias``, see resolve_run); a name the store does not hold
    stops the page with one message. With nothing named, the newest run is shown and written into the URL, so a copied
    link keeps showing it when runs are added. Picking another run writes ``key=<run id>`` and drops ``alias``.
    """
    named = st.query_params.get(key) or (st.query_params.get(alias) if alias else None)
    if named:
        chosen = resolve_run(named, options)
        if chosen is None:
            stop_unknown([named])
    else:
        chosen = options[0]
        _write_url(key, chosen, (alias,) if alias else ())
    st.session_state[key] = chosen
    drop = (alias,) if alias else ()
    return str(column.selectbox(label, options, key=key, on_change=_picked_to_url, args=(key, drop),
                                format_func=visible))  # fmt: skip


def url_names(key: str, legacy: Sequence[str] = ()) -> list[str] | None:
    """The names a URL gives under ``key`` (repeated, or one comma list), else under the ``legacy`` keys (``a=``,
    ``b=``); None when it gives none (an empty ``key=`` is an empty pick, not none)."""
    if key in st.query_params:
        return list(dict.fromkeys(n for v in st.query_params.get_all(key) for n in v.split(",") if n))
    old = [st.query_params[k] for k in legacy if st.query_params.get(k)]
    return list(dict.fromkeys(old)) if old else None


def runs_choice(label: str, options: list[str], key: str, legacy: tuple[str, ...] = (), default: int = 2) -> list[str]:
    """Several runs picked from ``options`` (run ids, newest first), kept in the URL as repeated ``key=`` parameters.

    Named runs or cells are resolved as in run_choice (an unknown one stops the page); with none named, the ``default``
    newest runs are shown and written into the URL. A new pick replaces the ``legacy`` parameters (``a=``, ``b=``).
    """
    named = url_names(key, legacy)
    if named is None:
        chosen = options[:default]
        _write_url(key, chosen, legacy)
    else:
        resolved = {n: resolve_run(n, options) for n in named}
        unknown = [n for n, run in resolved.items() if run is None]
        if unknown:
            stop_unknown(unknown)
        chosen = list(dict.fromkeys(str(r) for r in resolved.values()))
    st.session_state[key] = chosen
    picked = st.multiselect(label, options, key=key, on_change=_picked_to_url, args=(key, legacy), format_func=visible)
    return [str(p) for p in picked]


def stored_runs(minimum: int = 1) -> pd.DataFrame:
    """Every ingested run (``queries.runs``); the page stops with a note when the store holds fewer than ``minimum``."""
    runs: pd.DataFrame = query("runs")
    if len(runs) < minimum:
        st.info("No runs in the store yet." if minimum == 1 else f"This page needs {minimum} runs in the store.")
        st.stop()
    return runs
