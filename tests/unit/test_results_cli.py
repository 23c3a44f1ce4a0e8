"""`corewarding results ...` and `corewarding dashboard` from the command line, including bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.matrix import load_matrix
from corewarding.results import schema, synthetic


def test_ingest_info_and_a_second_ingest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, data = synthetic.write_result_set(tmp_path, load_matrix("demo").cells[:2], synthetic.SyntheticSpec(steps=4))
    db = tmp_path / "store" / "r.duckdb"
    args = ["results", "ingest", "--db", str(db), "--runs", str(runs), "--data-dir", str(data)]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["runs"] == 2 and first["reports"] == 2 and first["rows"]["paper_results"] == 609
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["rows"] == {} and again["changed"] == 0
    assert main(["results", "info", "--db", str(db)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["schema_version"] == schema.SCHEMA_VERSION and info["rows"]["runs"] == 2
    assert info["rows"]["eval_samples"] == 2 * 7 * 16


def test_bad_input_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "data" / "math" / "train.quality.json"
    report.parent.mkdir(parents=True)
    report.write_text("[]")
    assert main(["results", "ingest", "--db", str(tmp_path / "r.duckdb"), "--data-dir", str(tmp_path / "data")]) == 2
    assert f"{report}: not a JSON object" in capsys.readouterr().err
    assert main(["results", "ingest", "--db", str(tmp_path / "r.duckdb"), "--runs", str(tmp_path / "nope")]) == 2
    assert "nope: no such folder" in capsys.readouterr().err
    assert main(["dashboard", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "run `corewarding results ingest` first" in capsys.readouterr().err
    assert main(["results", "info", "--db", str(tmp_path / "none.duckdb")]) == 2


def test_synthetic_writes_run_folders_for_a_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["results", "synthetic", "--out", str(tmp_path), "--matrix", "demo", "--steps", "6", "--samples", "8"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    folders = sorted(p.name for p in Path(out["runs"]).iterdir())
    assert folders == sorted(c.cell_id for c in load_matrix("demo").cells)
    assert json.loads((Path(out["runs"]) / folders[0] / "run.json").read_text())["backend"] == "synthetic"


def test_with_no_source_named_runs_and_data_are_ingested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    synthetic.write_result_set(tmp_path, load_matrix("demo").cells[:1], synthetic.SyntheticSpec(steps=4))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COREWARDING_RESULTS_DB", raising=False)
    assert main(["results", "ingest"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["db"] == "results/results.duckdb" and summary["runs"] == 1 and summary["reports"] == 2
    assert (tmp_path / "results" / "results.duckdb").is_file()
    assert main(["results", "ingest", "--runs", "runs"]) == 0  # a named source: data/ is not added
    assert json.loads(capsys.readouterr().out)["reports"] == 0
