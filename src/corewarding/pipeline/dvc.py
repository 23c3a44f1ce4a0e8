"""The pipeline's side of DVC: reproduce the data stages, list the cells in params.yaml, record finished stages.

``dvc.yaml`` has ``train@<cell_id>`` and ``evaluate@<cell_id>`` stages, a ``foreach`` over ``params.yaml: cells``.
The pipeline adds the cells it runs to that list, and after a cell trains and evaluates it runs ``dvc commit`` on
its two stages, so ``dvc status`` then reports them up to date and ``dvc repro`` alone reruns only what changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psutil
from ruamel.yaml import YAML

from corewarding.config import load_group_option
from corewarding.errors import ExpectedError
from corewarding.files import atomic_path
from corewarding.interrupts import deferred_interrupts
from corewarding.pipeline import dvc_lock
from corewarding.pipeline.cells import CellPlan, dvc_entry

log = logging.getLogger(__name__)

INTERRUPT_GRACE_S = 5.0  # how long an interrupted run waits for its dvc child (a commit takes 1-2 s)


class DvcError(ExpectedError, RuntimeError):
    """A dvc command failed; the message holds the command and the end of its output."""


class DvcLockError(DvcError):
    """Another dvc process holds the repository lock (worth a retry)."""


def dvc_executable() -> str:
    """The ``dvc`` beside this interpreter (the project's venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "dvc"
    found = str(beside) if beside.exists() else shutil.which("dvc")
    if not found:
        raise DvcError("dvc is not installed (pip install dvc)")
    return found


def is_dvc_repo(root: Path) -> bool:
    return (root / ".dvc").is_dir() and (root / "dvc.yaml").is_file()


def run_dvc(root: Path, *args: str, timeout: float | None = None) -> str:
    """Run ``dvc ARGS`` in ``root`` with the venv's executables on PATH; raise DvcError with its output on failure.

    ``dvc.lock`` stays whole whatever stops us (``dvc_lock``): a broken one is set aside first, a copy is kept, and
    the child runs in its own session, so the terminal's Ctrl-C does not cut it while it writes the lock; our own
    interrupt stops it the clean way (``_stop_on_interrupt``), and a kill brings the copy back.
    """
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = [dvc_executable(), *args]
    what = f"`dvc {' '.join(args)}`"
    dvc_lock.keep_local(root)
    before = _check_and_back_up(root, what)
    # Output to a file, not a pipe: a child that outlives us (we were killed) must not die writing to a closed pipe.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = _wait(proc, what, timeout)
        finally:
            dvc_lock.keep_whole(root, before, proc.poll(), what)
        out.seek(0)
        output = out.read()
    if returncode != 0:
        error = DvcLockError if "Unable to acquire lock" in output else DvcError
        raise error(f"{what} in {root} failed (exit {returncode}):\n{output[-4000:]}")
    return output


def _check_and_back_up(root: Path, what: str, back_up: bool = True) -> bytes | None:
    """Set a broken ``dvc.lock`` aside and (``back_up``, before a dvc call) keep a copy of it (``dvc_lock``), under
    DVC's repository lock."""
    try:
        with dvc_lock.repo_lock(root):
            dvc_lock.set_aside_if_broken(root)
            return dvc_lock.back_up(root) if back_up else None
    except dvc_lock.RepoBusy as busy:
        raise DvcLockError(f"{what} in {root}: {busy}") from None


def _wait(proc: subprocess.Popen[bytes], what: str, timeout: float | None) -> int:
    """The dvc child's exit status; on a timeout or our interrupt it is stopped first."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise DvcError(f"{what} did not finish in {timeout} s; stopped it") from None
    except BaseException:  # KeyboardInterrupt: Ctrl-C, or SIGTERM under interrupts.interruptible
        with deferred_interrupts():  # a second Ctrl-C must not cut this short
            _stop_on_interrupt(proc, what)
        raise


def _stop_on_interrupt(proc: subprocess.Popen[bytes], what: str) -> None:
    """Stop a dvc child the way that keeps its records whole: each stage command it runs (or starts meanwhile) gets
    SIGINT (DVC ignores SIGINT then, sees the stage fail and exits cleanly); DVC's own work (hashing, writing dvc.lock,
    a commit) is left to finish. Still running after ``INTERRUPT_GRACE_S``, it is killed (``keep_whole`` then
    restores the lock)."""

    log.info("interrupted: waiting up to %.0f s for %s to stop", INTERRUPT_GRACE_S, what)
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    signalled: set[int] = set()
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for stage in psutil.Process(proc.pid).children(recursive=True):
                if stage.pid not in signalled:
                    signalled.add(stage.pid)
                    with contextlib.suppress(psutil.Error):
                        stage.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
    if proc.poll() is None:
        log.warning("%s did not stop in %.0f s; killing it", what, INTERRUPT_GRACE_S)
        _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the dvc child and its stage commands (its process group), and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def repro_stages(root: Path, stages: Sequence[str]) -> str:
    """``dvc repro STAGES`` (with their upstream stages), listed in ``params.yaml`` first; nothing to do when no
    stage is named."""
    if not stages:
        log.info("no data stage needed")
        return ""
    add_data_stages(root / DVC_PARAMS, stages)
    log.info("dvc repro %s", " ".join(stages))
    return run_dvc(root, "repro", *stages)


DVC_PARAMS = "params.yaml"  # the file whose keys dvc.yaml's `foreach` reads (DVC's default params file)
PARAMS_HEADER = """\
# This checkout's record of what `dvc repro` and `dvc status` know: the matrix cells (dvc.yaml's train@<cell_id> and
# evaluate@<cell_id> stages iterate over `cells`) and the data sets (`data_stages`); not tracked by git. `corewarding
# pipeline run` adds the cells and data sets it runs; `corewarding pipeline cells --matrix demo --write` adds cells
# without running them, `corewarding data track SET` a data set's stages.
"""
# The data stages of dvc.yaml that iterate over params.yaml's `data_stages.<name>`, and each one's entry for a set
DATA_STAGES = ("prepare", "rephrase", "import_rephrased")
# A stage beyond prepare@ exists for a set whose datasource names this field; its params.yaml entry keeps it as
SOURCE_FIELDS = {"rephrase": ("rephraser", "rephraser"), "import_rephrased": ("rephrased_release", "release")}


def _load_yaml(path: Path) -> Any:
    if not path.is_file():
        return {}
    try:
        return YAML().load(path.read_text()) or {}
    except Exception as exc:  # ruamel raises many error types; each is a malformed file
        raise DvcError(f"{path}: not valid YAML: {exc}") from exc


def _load_params(params_file: Path) -> dict[str, Any]:
    data = _load_yaml(params_file)
    if not isinstance(data, dict):
        raise DvcError(f"{params_file}: expected a mapping with 'cells' and 'data_stages' keys")
    return data


def _write_params(params_file: Path, data: dict[str, Any]) -> None:
    new = not params_file.is_file()
    with atomic_path(params_file, durable=True) as tmp, tmp.open("w") as handle:  # whole or not at all
        if new:
            handle.write(PARAMS_HEADER)
        YAML().dump(data, handle)


def data_stage_entries(stages: Iterable[str]) -> dict[str, dict[str, dict[str, str]]]:
    """``{stage name: {set: entry}}`` for the named data stages (``prepare@math``, ...) and the ``prepare@`` stage
    each one reads, from the sets' ``configs/datasource/<set>.yaml``; other stages (``tiny_data``) need no entry."""
    entries: dict[str, dict[str, dict[str, str]]] = {name: {} for name in DATA_STAGES}
    for stage in stages:
        name, _, key = stage.partition("@")
        if name not in DATA_STAGES or not key:
            continue
        source = _datasource(key, f"data stage {stage}")
        entries["prepare"][key] = {"split": str(source.split)}
        if name in SOURCE_FIELDS:
            field, entry_key = SOURCE_FIELDS[name]
            if not source.get(field):
                raise DvcError(f"data stage {stage}: configs/datasource/{key}.yaml names no {field}")
            entries[name][key] = {entry_key: str(source[field])}
    return entries


def set_stages(name: str) -> list[str]:
    """Every data stage a set has: ``prepare@<set>``, and ``rephrase@``/``import_rephrased@`` when its datasource
    names a rephraser / a released rephrasing (``corewarding data track``)."""
    source = _datasource(name, f"data set {name}")
    return [f"prepare@{name}"] + [f"{stage}@{name}" for stage, (field, _) in SOURCE_FIELDS.items() if source.get(field)]


def _datasource(key: str, what: str) -> Any:
    """``configs/datasource/<key>.yaml``'s datasource section; an unknown set is a DvcError naming ``what``."""
    try:
        return load_group_option("datasource", key).datasource
    except KeyError as exc:
        raise DvcError(f"{what}: {exc.args[0]}") from None


def add_data_stages(params_file: Path, stages: Iterable[str]) -> bool:
    """List the data stages (and the ``prepare@`` stages they read) under ``params_file: data_stages``, so ``dvc
    repro``/``dvc status`` know them; a set's stages exist for DVC only once listed. True if the file changed."""
    wanted = data_stage_entries(stages)
    if not any(wanted.values()):
        return False
    data = _load_params(params_file)
    listed = data.get("data_stages")
    if listed is None:
        listed = data["data_stages"] = {}
    if not isinstance(listed, dict):
        raise DvcError(f"{params_file}: 'data_stages' must map {', '.join(DATA_STAGES)} to their sets")
    changed = False
    for name, sets in wanted.items():
        have = listed.get(name)
        if have is None:
            have = listed[name] = {}
        if not isinstance(have, dict):
            raise DvcError(f"{params_file}: 'data_stages.{name}' must map set names to their entries")
        for key, entry in sets.items():
            if dict(have.get(key) or {}) != entry:
                have[key] = entry
                changed = True
    if changed:
        _write_params(params_file, data)
        log.info("%s: listed data stages %s for dvc", params_file, ", ".join(sorted(set(stages))))
    return changed


def add_cells_to_params(
    params_file: Path, plans: Sequence[CellPlan], trained: Iterable[str] = (), evaluated: Iterable[str] = ()
) -> bool:
    """Add the plans' entries to ``params_file: cells``; comments and other keys stay. True if the file changed.

    A cell already listed keeps the overrides its stages were recorded with, except ``train_args`` of a cell in
    ``trained`` and ``eval_args`` of one in ``evaluated`` (steps that ran now, with this run's overrides).
    """

    data = _load_params(params_file)
    if data.get("cells") is None:
        data["cells"] = {}
    cells = data["cells"]
    if not isinstance(cells, dict):
        raise DvcError(f"{params_file}: 'cells' must map cell ids to their entries")
    trained, evaluated = set(trained), set(evaluated)
    changed = False
    for plan in plans:
        entry = dvc_entry(plan)
        listed = dict(cells.get(plan.cell_id) or {})
        if listed:
            for key, ran in (("train_args", trained), ("eval_args", evaluated)):
                if plan.cell_id not in ran and key in listed:
                    entry[key] = listed[key]
        if listed != entry:
            cells[plan.cell_id] = entry
            changed = True
    if changed:
        _write_params(params_file, data)
        log.info("%s: listed %d cell(s) for dvc", params_file, len(plans))
    return changed


def unrecorded(root: Path, step: str, cell_ids: Iterable[str]) -> list[str]:
    """The cells whose ``<step>@<cell>`` stage ``dvc.lock`` does not list: an earlier run did the step and was stopped
    (Ctrl-C) before it recorded it; a later run that skips the finished step records it then."""
    _check_and_back_up(root, "reading dvc.lock", back_up=False)  # only read: the next dvc call keeps its own copy
    lock = _load_yaml(root / dvc_lock.LOCK)
    stages = lock.get("stages") if isinstance(lock, dict) else None
    return [c for c in cell_ids if f"{step}@{c}" not in (stages or {})]


def record_cells(
    root: Path, params_file: Path, plans: Sequence[CellPlan], trained: Sequence[str], evaluated: Sequence[str]
) -> list[str]:
    """List the cells whose training or evaluation ran now and ``dvc commit`` the stages that ran.

    Only work done in this run is recorded (``train@`` of the cells in ``trained``, ``evaluate@`` of those in
    ``evaluated``): a skipped step keeps whatever DVC knew of it, so a stage made stale by a code or data change
    stays visible in ``dvc status``.
    """
    ran = [p for p in plans if p.cell_id in set(trained) | set(evaluated)]
    if not ran:
        return []
    add_cells_to_params(root / params_file, ran, trained, evaluated)
    stages = [f"train@{c}" for c in trained] + [f"evaluate@{c}" for c in evaluated]
    run_dvc(root, "commit", "--force", *stages)
    log.info("recorded in dvc.lock: %s", ", ".join(stages))
    return stages


def reproduce_groups(root: Path, groups: dict[tuple[str, ...], list[str]]) -> dict[str, str]:
    """``dvc repro`` each group of data stages in turn; returns cell id -> error for the cells of failed groups."""
    failed: dict[str, str] = {}
    for stages, cell_ids in groups.items():
        try:
            repro_stages(root, stages)
        except (DvcError, OSError) as exc:
            log.error("data stages %s failed: %s", ", ".join(stages), exc)
            failed.update(dict.fromkeys(cell_ids, f"{type(exc).__name__}: {exc}"))
    return failed
