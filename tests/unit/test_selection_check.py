"""A selection's names are checked against the matrix before anything starts (issue 45): a misspelt --method,
--base-model, --dataset or --cell is one line naming it, the closest valid name and the valid ones, and exit 2, with no
Prefect server started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corewarding.matrix import Cell, Matrix, load_matrix
from corewarding.pipeline.cells import Selection, SelectionError, check_selection

BIN = Path(sys.executable).parent
CELLS = (
    Cell("gt_grpo", "qwen3-8b-base", "math"),
    Cell("gt_grpo", "qwen3-8b-base", "math", seed=1),
    Cell("majority_voting", "qwen3-8b-base", "math"),
    Cell("gt_grpo", "qwen3-4b-base", "dapo14k"),
)
MATRIX = Matrix("small", CELLS)


def _error(**facets: tuple[str, ...]) -> str:
    with pytest.raises(SelectionError) as caught:
        check_selection(MATRIX, Selection(matrix="small", **facets))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_valid_names_select_their_cells() -> None:
    assert check_selection(MATRIX, Selection(matrix="small", base_models=("qwen3-8b-base",), methods=("gt_grpo",))) == [
        CELLS[0],
        CELLS[1],
    ]
    assert check_selection(MATRIX, Selection(matrix="small", cells=("gt_grpo__qwen3-8b-base__math__seed1",))) == [
        CELLS[1]
    ]
    assert check_selection(MATRIX, Selection(matrix="small")) == list(CELLS)


def test_a_misspelt_base_model_dataset_or_cell_id_names_the_closest_and_the_valid_ones() -> None:
    assert _error(base_models=("qwen3-8b-bse",)) == (
        "base model qwen3-8b-bse: not in matrix small; did you mean qwen3-8b-base? "
        "(valid: qwen3-4b-base, qwen3-8b-base)"
    )
    assert _error(datasets=("math", "dapo")) == (
        "dataset dapo: not in matrix small; did you mean dapo14k? (valid: dapo14k, math)"
    )
    assert _error(cells=("gt_grpo__qwen3-8b-base__mat",)).startswith(
        "cell gt_grpo__qwen3-8b-base__mat: not in matrix small; did you mean gt_grpo__qwen3-8b-base__math? (valid: "
        "gt_grpo__qwen3-4b-base__dapo14k, gt_grpo__qwen3-8b-base__math, gt_grpo__qwen3-8b-base__math__seed1, "
    )
    assert _error(methods=("majority_votng",)) == (
        "method majority_votng: not in matrix small; did you mean majority_voting? (valid: gt_grpo, majority_voting)"
    )


def test_no_hint_when_nothing_is_close_and_odd_names_stay_on_one_line() -> None:
    assert _error(datasets=("openrs",)) == "dataset openrs: not in matrix small (valid: dapo14k, math)"
    assert _error(methods=("gt_grpo\nerror: forged",)).startswith("method 'gt_grpo\\nerror: forged': not in matrix")


def test_the_caller_names_the_options_and_a_selection_of_valid_names_that_picks_nothing_is_an_error() -> None:
    labels = {"methods": "--method", "datasets": "--dataset"}
    with pytest.raises(SelectionError, match=r"^--method gt_grpox: not in matrix small; did you mean gt_grpo\?"):
        check_selection(MATRIX, Selection(matrix="small", methods=("gt_grpox",)), labels)
    with pytest.raises(SelectionError) as caught:
        check_selection(MATRIX, Selection(matrix="small", methods=("majority_voting",), datasets=("dapo14k",)), labels)
    assert str(caught.value) == (
        "--method majority_voting, --dataset dapo14k: no cell of matrix small matches all of these "
        "(corewarding matrix list --matrix small)"
    )


def test_a_long_list_of_valid_names_is_cut_and_points_to_matrix_list() -> None:
    many = Matrix("many", tuple(Cell("gt_grpo", f"model-{i:02d}", "math") for i in range(30)))
    with pytest.raises(SelectionError) as caught:
        check_selection(many, Selection(matrix="many", base_models=("model-28x",)))
    message = str(caught.value)
    assert "did you mean model-28?" in message and "model-23, ... and 6 more" in message  # the hint sees all
    assert message.endswith("corewarding matrix list --matrix many)")


def test_a_misspelt_matrix_names_the_closest() -> None:
    with pytest.raises(KeyError, match=r"unknown matrix 'dem'; did you mean demo\? \(known: demo, paper"):
        load_matrix("dem")


def _no_prefect_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as typed, in an empty folder, with a PREFECT_HOME of its own; nothing may appear in either."""
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(OMP_NUM_THREADS="1", PREFECT_HOME=str(home))
    done = subprocess.run([str(BIN / "corewarding"), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-3000:]
    assert len(done.stderr.splitlines()) == 1 and done.stdout == "", done.stdout[-2000:] + done.stderr[-3000:]
    # no server: none of its start-up lines, no Prefect state in the checkout (cwd) or in PREFECT_HOME
    assert "Prefect server" not in done.stderr and "flow run" not in done.stderr.lower()
    assert not (tmp_path / ".prefect").exists() and not home.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    return done


def test_pipeline_run_with_a_misspelt_method_is_one_line_and_exit_2_before_prefect_starts(tmp_path: Path) -> None:
    """The command of the issue, as typed: it used to start a private Prefect server and a flow run, then fail
    minutes later with a Selection(...) repr."""
    (line,) = _no_prefect_run(tmp_path, "pipeline", "run", "--method", "majority_votng").stderr.splitlines()
    assert line.startswith("error: --method majority_votng: not in matrix demo; did you mean majority_voting? ")
    assert line.endswith("(valid: co_rewarding_1, co_rewarding_2, co_rewarding_3, entropy, gt_grpo, "
                         "majority_voting, self_certainty)")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("audit", "--base-model", "qwen3-8b"), "error: --base-model qwen3-8b: not in matrix paper_v3; did you mean "),
        (("audit", "--dry-run", "--dataset", "mth"),
         "error: --dataset mth: not in matrix paper_v3; did you mean math? "),
        (("pipeline", "run", "--dry-run", "--cell", "entropy__tiny"),
         "error: --cell entropy__tiny: not in matrix demo; did you mean entropy__tiny__tiny? "),
        (("pipeline", "cells", "--matrix", "paper", "--method", "gt_grpo", "--dataset", "tiny"),
         "error: --dataset tiny: not in matrix paper (valid: dapo14k, math, openrs)"),
    ],
    ids=["audit", "audit --dry-run", "pipeline run --dry-run", "pipeline cells"],
)  # fmt: skip
def test_every_command_with_a_selection_checks_it_first(tmp_path: Path, args: tuple[str, ...], start: str) -> None:
    assert _no_prefect_run(tmp_path, *args).stderr.startswith(start)
