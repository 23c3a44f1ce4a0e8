"""Cell ids taken in from outside (a run folder's config.yaml, an audit record) keep the matrix's plain-name rule: a
bidi override, a zero-width character or a Cyrillic look-alike is refused, and nothing of that folder is stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from corewarding.cli import main
from corewarding.config import ConfigError, config_dir
from corewarding.matrix import is_plain_name, load_matrix
from corewarding.results.ingest.ingestion import ingest
from corewarding.results.ingest.released import AuditRecordError
from corewarding.results.ingest.run_folders import RunFolderError
from corewarding.results.store import store

ODD = {
    "bidi override": "gt_grpo\u202e__tiny__tiny",
    "zero-width space": "gt_grpo__ti\u200bny__tiny",
    "Cyrillic o": "gt_grp\u043e__tiny__tiny",
}


def write_run(run_dir: Path, method: str) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"method: {{name: '{method}'}}\nbase_model: {{name: tiny}}\n"
                                         "dataset: {name: tiny}\n", encoding="utf-8")  # fmt: skip
    (run_dir / "metrics.jsonl").write_text('{"step": 0, "val_accuracy": 0.5}\n')
    return run_dir


def stored(db: Path) -> list[tuple[object, ...]]:
    with store.reader(db) as con:
        runs = con.execute("SELECT cell_id FROM runs ORDER BY 1").fetchall()
        return runs + con.execute("SELECT DISTINCT run_id FROM training_metrics ORDER BY 1").fetchall()


@pytest.mark.parametrize("cell_id", ODD.values(), ids=ODD.keys())
def test_an_ingest_refuses_a_run_folder_whose_cell_id_is_not_plain(
    tmp_path: Path, cell_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    write_run(tmp_path / "runs" / "good", "gt_grpo")
    ingest(db, [tmp_path / "runs"])
    before = stored(db)
    assert [row[0] for row in before[:1]] == ["gt_grpo__tiny__tiny"]
    write_run(tmp_path / "runs" / "other", "entropy")  # a good run of the same ingest: the whole ingest refuses
    bad = write_run(tmp_path / "runs" / "bad", cell_id.split("__")[0])
    (bad / "config.yaml").write_text((bad / "config.yaml").read_text(encoding="utf-8").replace(
        "{name: tiny}\n", f"{{name: '{cell_id.split('__')[1]}'}}\n", 1), encoding="utf-8")  # fmt: skip
    with pytest.raises(RunFolderError) as refused:
        ingest(db, [tmp_path / "runs"])
    message = str(refused.value)
    assert message.startswith(f"{bad}: cell id ") and "is not a plain name" in message and "\n" not in message
    assert stored(db) == before  # nothing of that folder, nor of the ingest it was part of
    assert main(["results", "ingest", "--run-dir", str(bad), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {bad}: cell id ")
    assert not {"\u202e", "\u200b"} & set(err)  # the id is shown escaped ('\u202e'), never raw
    assert stored(db) == before


def test_the_matrix_and_an_audit_record_keep_the_same_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert is_plain_name("co_rewarding_2__qwen3-8b-base__dapo14k__seed1") and is_plain_name("a.b@c+d=e-f")
    assert not any(is_plain_name(name) for name in ODD.values())
    configs = tmp_path / "configs"
    shutil.copytree(config_dir(), configs)
    monkeypatch.setenv("COREWARDING_CONFIG_DIR", str(configs))
    shutil.copy(configs / "method" / "gt_grpo.yaml", configs / "method" / "gt_grp\u043e.yaml")  # the option exists
    (configs / "matrix" / "odd.yaml").write_text(
        "name: odd\ncells:\n  - {method: gt_grp\u043e, base_model: tiny, dataset: tiny}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"odd\.yaml: cell 0 \('gt_grp.__tiny__tiny'\) is not a plain name"):
        load_matrix("odd")
    folder = tmp_path / "runs" / "gt_grpo__tiny__tiny" / "released"
    folder.mkdir(parents=True)
    record = {"cell_id": "gt_grpo__tiny\u202e__tiny", "method": "gt_grpo", "base_model": "tiny", "dataset": "tiny",
              "hub_repo_id": "x/y", "revision": "f" * 40, "status": "done"}  # fmt: skip
    (folder / "audit.json").write_text(json.dumps(record))
    with pytest.raises(AuditRecordError, match=r"audit\.json: cell_id='gt_grpo__tiny\\u202e__tiny' is not a plain"):
        ingest(tmp_path / "r.duckdb", [tmp_path / "runs"])
    assert main(["results", "ingest", "--runs", str(tmp_path / "runs"), "--db", str(tmp_path / "r.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "audit.json: cell_id=" in err and "\u202e" not in err  # one line, escaped
    assert not (tmp_path / "r.duckdb").exists()
