"""`corewarding results ...` and `corewarding dashboard` from the command line, including bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.matrix import load_matrix
from corewarding.results import synthetic
from corewarding.results.store import schema


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


def test_synthetic_writes_run_folders_and_their_own_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # the real store would be results/results.duckdb here
    monkeypatch.delenv("COREWARDING_RESULTS_DB", raising=False)
    args = ["results", "synthetic", "--out", "preview", "--matrix", "demo", "--steps", "6", "--samples", "8"]
    assert main(args) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    folders = sorted(p.name for p in Path(out["runs"]).iterdir())
    assert folders == sorted(c.cell_id for c in load_matrix("demo").cells)
    assert json.loads((Path(out["runs"]) / folders[0] / "run.json").read_text())["backend"] == "synthetic"
    assert out["db"] == "preview/results.duckdb" and f"dashboard --db {out['db']}" in captured.err
    assert not (tmp_path / "results").exists()  # the real store is not touched
    assert main(["results", "info", "--db", out["db"]]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]["runs"] == len(folders)
    # --matrix repeats: the union of the matrices' cells, each once
    assert main([*args[:3], "again", *args[4:], "--matrix", "demo"]) == 0
    assert sorted(p.name for p in (tmp_path / "again" / "runs").iterdir()) == folders


def test_synthetic_runs_are_refused_by_the_real_store_and_can_be_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old preview recipe put 66 synthetic runs into results/results.duckdb and nothing removed them."""
    runs, data = synthetic.write_result_set(
        tmp_path / "p", load_matrix("demo").cells[:2], synthetic.SyntheticSpec(steps=4)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COREWARDING_RESULTS_DB", raising=False)
    assert main(["results", "ingest", "--runs", str(runs)]) == 2
    assert (
        "is a synthetic run (2 in all): synthetic runs are not ingested into the real store" in capsys.readouterr().err
    )
    assert not (tmp_path / "results").exists()
    db = tmp_path / "results" / "results.duckdb"  # a store an older recipe filled, beside a real run
    assert main(["results", "ingest", "--db", str(db), "--runs", str(runs), "--data-dir", str(data)]) == 0
    real = synthetic.write_result_set(
        tmp_path / "real", load_matrix("demo").cells[2:3], synthetic.SyntheticSpec(steps=4)
    )
    record = real[0] / load_matrix("demo").cells[2].cell_id / "run.json"
    record.write_text(record.read_text().replace('"backend": "synthetic"', '"backend": "local"'))
    assert main(["results", "ingest", "--db", str(db), "--runs", str(real[0])]) == 0
    capsys.readouterr()
    assert main(["results", "forget-synthetic", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out) == {"db": str(db), "runs": 2, "quality_reports": 2}
    assert main(["results", "info", "--db", str(db)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows["runs"] == 1 and rows["quality_reports"] == 0 and rows["eval_samples"] == 7 * 16  # the real run stays


def test_with_no_source_named_runs_and_data_are_ingested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, _ = synthetic.write_result_set(tmp_path, load_matrix("demo").cells[:1], synthetic.SyntheticSpec(steps=4))
    record = runs / load_matrix("demo").cells[0].cell_id / "run.json"  # a run in the real formats, not a preview's
    record.write_text(record.read_text().replace('"backend": "synthetic"', '"backend": "local"'))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COREWARDING_RESULTS_DB", raising=False)
    assert main(["results", "ingest"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["db"] == "results/results.duckdb" and summary["runs"] == 1 and summary["reports"] == 2
    assert (tmp_path / "results" / "results.duckdb").is_file()
    assert main(["results", "ingest", "--runs", "runs"]) == 0  # a named source: data/ is not added
    assert json.loads(capsys.readouterr().out)["reports"] == 0
