"""Rephrasing: the parser's rejections, retries with new seeds, failure handling, and imports of released pairs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from corewarding.config import compose_config
from corewarding.data.rephrase.importer import import_rephrased
from corewarding.data.rephrase.parse import parse_generation
from corewarding.data.rephrase.prompt import INSTRUCTION, PLACEHOLDER, RESULT_END, RESULT_START, rephrase_messages
from corewarding.data.rephrase.run import Generation, rephrase_chunk, row_seed
from corewarding.pipeline.cells import Selection, plan_cells
from corewarding.schemas import RephraseConfig, RewriteChecks, section_of, typed
from corewarding.training.common import total_steps

CHECKS = OmegaConf.create(
    {
        "placeholder": {"action": "reject"},
        "unchanged": {"action": "reject"},
        "numbers": {"action": "reject", "min_kept_fraction": 0.5, "ignore_single_digits": True},
    }
)
ORIGINAL = "A box holds 12 red and 30 blue balls. How many balls are in the box?"


def _spec(**changes: int) -> RephraseConfig:
    """The data root's rephraser with the checks above and ``changes``, typed as the run reads it."""
    base = section_of(compose_config([], config_name="data"), RephraseConfig)
    return replace(base, checks=typed(RewriteChecks, CHECKS, "rephrase.checks"), **changes)


def wrap(rewrite: str, original: str = ORIGINAL) -> str:
    return f"{RESULT_START}\nORIGINAL:\n{original}\nREWRITE:\n{rewrite}\n{RESULT_END}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("A shelf has 12 novels and 30 comics. How many books?", None),
        ("no markers at all", "missing_markers"),
        (f"{RESULT_START}\nREWRITE: x", "missing_markers"),
        (f"{RESULT_END}\n{RESULT_START}\nREWRITE: x", "markers_out_of_order"),
        (f"{RESULT_START}\nORIGINAL: only\n{RESULT_END}", "missing_rewrite_label"),
        (wrap(PLACEHOLDER), "placeholder"),
        (wrap("   "), "empty"),
        (wrap(ORIGINAL.replace(" ", "  ")), "unchanged"),
        (wrap("A shelf has some novels and comics. How many books?"), "lost_numbers"),
    ],
)
def test_parser_accepts_only_a_real_rewrite(text: str, reason: str | None) -> None:
    text = text if RESULT_START in text or reason else wrap(text)
    verdict = parse_generation(text, ORIGINAL, CHECKS)
    assert verdict.reason == reason
    if reason is None:
        assert verdict.rewrite == "A shelf has 12 novels and 30 comics. How many books?"


def test_first_markers_win_and_the_rewrite_is_stripped() -> None:
    text = "chatter " + wrap("  Two shelves: 12 and 30 books. Total?  ") + "\n" + wrap("second")
    assert parse_generation(text, ORIGINAL, CHECKS).rewrite == "Two shelves: 12 and 30 books. Total?"


def test_number_heuristic_is_configurable() -> None:
    lenient = OmegaConf.merge(CHECKS, {"numbers": {"min_kept_fraction": 0.5}})
    half = wrap("A shelf has 12 novels and some comics. How many books?")
    assert parse_generation(half, ORIGINAL, lenient).accepted
    strict = OmegaConf.merge(CHECKS, {"numbers": {"min_kept_fraction": 1.0}})
    assert parse_generation(half, ORIGINAL, strict).reason == "lost_numbers"
    flag = OmegaConf.merge(CHECKS, {"numbers": {"action": "flag", "min_kept_fraction": 1.0}})
    verdict = parse_generation(half, ORIGINAL, flag)
    assert verdict.accepted and verdict.flags[0][0] == "lost_numbers"


def test_prompt_carries_the_requirements_and_the_question() -> None:
    (message,) = rephrase_messages("What is 2 + 2?")
    assert message["role"] == "user" and message["content"] == f"{INSTRUCTION}\nWhat is 2 + 2?"
    for phrase in ("different real-world scenario", "final answer", RESULT_START, "REWRITE:", RESULT_END):
        assert phrase in INSTRUCTION


class ScriptedGenerator:
    """Answers from a script keyed by (question, seed): stands in for an LLM whose outputs we choose."""

    def __init__(self, script: dict[tuple[int, int], str]) -> None:
        self.script = script
        self.calls: list[list[int]] = []

    def generate(self, conversations: list[list[dict[str, str]]], seeds: list[int]) -> list[Generation]:
        self.calls.append(seeds)
        return [Generation(self.script.get(divmod(s, 101), "garbage"), "stop") for s in seeds]


def _rows(n: int) -> list[dict]:
    from corewarding.rows import make_row

    return [make_row(f"Question {i}: add 12 and {30 + i}.", str(42 + i), i, "train") for i in range(n)]


def test_rejected_rows_are_retried_with_new_seeds_up_to_max_retries() -> None:
    rows = _rows(3)
    spec = _spec(max_retries=2, seed=0)
    good = {i: wrap(f"Mia has 12 apples and {30 + i} pears; how many fruits?", "") for i in range(3)}
    # row 0 right away, row 1 on its second try, row 2 never.
    script = {(0, 0): good[0], (1, 1): good[1]}
    gen = ScriptedGenerator(script)
    records = rephrase_chunk(gen, rows, range(3), spec, "k")
    assert gen.calls == [
        [row_seed(0, i, 0) for i in range(3)],
        [row_seed(0, 1, 1), row_seed(0, 2, 1)],
        [row_seed(0, 2, 2)],
    ]
    by_row = {i: [r for r in records if r["row"] == i] for i in range(3)}
    assert [len(v) for v in by_row.values()] == [1, 2, 3]
    assert by_row[0][0]["accepted"] and by_row[1][1]["accepted"] and not by_row[2][-1]["accepted"]
    assert by_row[2][-1]["reason"] == "missing_markers"


def test_release_import_reports_placeholders_and_keeps_pairs_aligned(shared_data: Path, tmp_path: Path) -> None:
    cfg = compose_config(["datasource=math", "rephrase=release", f"paths.data_dir={tmp_path}"], "data")
    report = import_rephrased(cfg, pairs=str(shared_data / "upstream/math/train_pairs.parquet"))
    assert report.extra["rejected"] == {"placeholder": 19, "unchanged": 2}
    assert all(r["action"] == "kept_original" for r in report.extra["rejected_rows"])
    # The same row validation as `data prepare`: the two blank ground truths stay (as in the reference), flagged.
    assert report.flagged["missing_ground_truth"] == 2 and report.rows_in == report.rows_out == 7500
    original = pq.read_table(tmp_path / "math/release/train_original.parquet").to_pylist()
    rephrased = pq.read_table(tmp_path / "math/release/train_rephrased.parquet").to_pylist()
    pairs = pq.read_table(tmp_path / "math/release/train_pairs.parquet").to_pylist()
    assert len(original) == len(rephrased) == len(pairs) == 7500
    for a, b, p in zip(original, rephrased, pairs, strict=True):
        assert a["reward_model"] == b["reward_model"] and a["extra_info"] == b["extra_info"]
        assert p["rephrased_question"] == b["prompt"][1]["content"] and p["idx"] == a["extra_info"]["index"]
    assert not any(PLACEHOLDER in r["prompt"][1]["content"] for r in rephrased)
    reference = pq.read_table(shared_data / "upstream/math/train.parquet").to_pylist()
    assert [r["prompt"] for r in original] == [r["prompt"] for r in reference]


def test_release_rows_take_their_identity_from_the_prepared_set(shared_data: Path, tmp_path: Path) -> None:
    """OpenRS's pair file numbers pairs 0..6998 after the source lost row 6668; the prepared rows fix the index."""
    from corewarding.data.prepare import prepare

    upstream = shared_data / "upstream/open-rs"
    base = ["datasource=openrs", f"paths.data_dir={tmp_path}", "datasource.tokenizer=null"]
    local = [f"datasource.local_file={upstream / 'train.parquet'}", "datasource.extra_info={level: extra_info.level}"]
    prepare(compose_config([*base, *local], "data"))
    report = import_rephrased(
        compose_config([*base, "rephrase=release"], "data"), pairs=str(upstream / "train_pairs.parquet")
    )
    assert report.extra["matched_prepared_rows"] == report.rows_out
    prepared = {r["extra_info"]["index"]: r for r in pq.read_table(tmp_path / "openrs/train.parquet").to_pylist()}
    original = pq.read_table(tmp_path / "openrs/release/train_original.parquet").to_pylist()
    assert all(prepared[r["extra_info"]["index"]] == r for r in original)
    assert max(r["extra_info"]["index"] for r in original) == 6999 and "level" in original[0]["extra_info"]
    # Repeated rows are kept and each takes its own prepared copy: every index once, all but the lost row 6668.
    indices = [r["extra_info"]["index"] for r in original]
    assert len(indices) == len(set(indices)) == 6999 and 6668 not in indices
    assert report.flagged["duplicate"] > 0 and sum(report.dropped.values()) == 0
    # Co-rewarding-I trains on these 6,999 pairs: 54 steps per epoch, 162 in all, as the reference.
    plan = plan_cells(Selection(matrix="paper", cells=("co_rewarding_1__qwen3-8b-base__openrs",)))[0]
    assert total_steps(plan.cfg, len(original)) == 162


@pytest.mark.parametrize(
    ("name", "files", "placeholders"),
    [
        ("openrs", {"pairs": "open-rs/train_pairs.parquet"}, 12),
        ("dapo14k", {"original": "dapo/train_original.parquet", "rewrite": "dapo/train_rewrite_Qwen3-32B.parquet"}, 45),
    ],
)
def test_release_placeholder_counts(
    shared_data: Path, tmp_path: Path, name: str, files: dict, placeholders: int
) -> None:
    cfg = compose_config(
        [f"datasource={name}", "rephrase=release", f"paths.data_dir={tmp_path}", "rephrase.on_failure=drop"], "data"
    )
    report = import_rephrased(cfg, **{k: str(shared_data / "upstream" / v) for k, v in files.items()})
    assert report.extra["rejected"]["placeholder"] == placeholders
    rejected = sum(report.extra["rejected"].values())
    assert report.dropped["rephrase_rejected"] == rejected
    assert report.rows_out == report.rows_in - sum(report.dropped.values()) and len(report.dropped_rows) == sum(
        report.dropped.values()
    )
    n = len(pq.read_table(tmp_path / name / "release/train_rephrased.parquet"))
    assert n == len(pq.read_table(tmp_path / name / "release/train_original.parquet")) == report.rows_out


def test_verl_pair_with_mismatched_answers_is_refused(tmp_path: Path) -> None:
    from corewarding.files import SourceError, write_parquet_atomic
    from corewarding.rows import make_row

    write_parquet_atomic([make_row("What is 12 + 30?", "42", 0, "train")], tmp_path / "o.parquet")
    write_parquet_atomic([make_row("Mia has 12 and 30 more?", "41", 0, "train")], tmp_path / "r.parquet")
    cfg = compose_config(["datasource=dapo14k", "rephrase=release", f"paths.data_dir={tmp_path}"], "data")
    with pytest.raises(SourceError, match=r"r.parquet: row 0: ground truth '41' differs"):
        import_rephrased(cfg, original=str(tmp_path / "o.parquet"), rewrite=str(tmp_path / "r.parquet"))
    assert not (tmp_path / "dapo14k").exists()


def test_prepared_set_is_required_before_rephrasing(tmp_path: Path) -> None:
    from corewarding.data.rephrase.run import rephrase
    from corewarding.files import SourceError

    cfg = compose_config(["datasource=tiny", f"paths.data_dir={tmp_path}"], "data")
    with pytest.raises(SourceError, match="corewarding data prepare tiny"):
        rephrase(cfg)


def test_raw_log_keeps_generations_with_unicode_line_separators(tmp_path: Path) -> None:
    import json

    from corewarding.data.rephrase.run import load_raw, rewrite_raw

    log = tmp_path / "raw.jsonl"
    records = [{"key": "k", "row": i, "attempt": 0, "text": wrap(f"Add\u2028them {i}\u0085", "")} for i in range(4)]
    log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + '{"key": "k", "row": 9')
    spec = _spec(batch_size=2, max_retries=0)
    kept, lines = load_raw(log, "k", ["What is 1 + 2?"] * 4, spec)
    rewrite_raw(log, lines)
    assert [kept[i][0]["text"] for i in range(4)] == [r["text"] for r in records]
    assert all(kept[i][0]["accepted"] for i in range(4))  # re-judged on load
    assert log.read_text(encoding="utf-8").count("\n") == 4  # the cut-off line is gone
