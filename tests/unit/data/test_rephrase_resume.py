"""The resumable rephrasing loop with a scripted generator (replies we choose): resume, re-judging, keys."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corewarding.config import ConfigError, compose_config
from corewarding.data.prepare import prepare
from corewarding.data.rephrase.prompt import PLACEHOLDER, RESULT_END, RESULT_START
from corewarding.data.rephrase.run import Generation, rephrase


class Scripted:
    """Replies by seed: 1 in 3 garbage, 1 in 5 the placeholder, else a real rewrite keeping the question's numbers."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.calls = 0

    def generate(self, conversations: list[list[dict[str, str]]], seeds: list[int]) -> list[Generation]:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("interrupted")
        self.calls += 1
        replies = []
        for conversation, seed in zip(conversations, seeds, strict=True):
            question = conversation[0]["content"].rsplit("\n", 1)[-1]
            if seed % 3 == 0:
                text = "I cannot help with that."
            elif seed % 5 == 0:
                text = f"{RESULT_START}\nORIGINAL:\n{question}\nREWRITE:\n{PLACEHOLDER}\n{RESULT_END}"
            else:
                text = f"{RESULT_START}\nORIGINAL:\n{question}\nREWRITE:\nAt the market: {question}\n{RESULT_END}"
            replies.append(Generation(text, "stop"))
        return replies


def _cfg(data_dir: Path, *overrides: str):
    base = ["datasource=tiny", "datasource.tokenizer=null", f"paths.data_dir={data_dir}", "rephrase.model=scripted"]
    return compose_config([*base, "rephrase.batch_size=8", "rephrase.max_retries=1", *overrides], "data")


def _outputs(data_dir: Path) -> dict[str, list]:
    names = ("train_rephrased", "train_original", "train_pairs")
    out = {name: pq.read_table(data_dir / f"tiny/{name}.parquet").to_pylist() for name in names}
    raw = (data_dir / "tiny/train_rephrase_raw.jsonl").read_text().split("\n")
    out["raw"] = sorted((json.loads(line) for line in raw if line), key=lambda r: (r["row"], r["attempt"]))
    return out


@pytest.fixture()
def prepared(tmp_path: Path) -> tuple[Path, Path]:
    full, cut = tmp_path / "full", tmp_path / "cut"
    for d in (full, cut):
        prepare(_cfg(d))
    return full, cut


def test_interrupted_run_resumes_to_the_uninterrupted_outputs(prepared: tuple[Path, Path]) -> None:
    full, cut = prepared
    uninterrupted = Scripted()
    report = rephrase(_cfg(full), generator=uninterrupted)
    assert report.extra["accepted_on_attempt"] and sum(report.extra["rejected"].values()) > 0
    assert set(report.extra["rejections_per_attempt"]) == {"missing_markers", "placeholder"}
    with pytest.raises(RuntimeError, match="interrupted"):
        rephrase(_cfg(cut), generator=Scripted(fail_after=5))
    assert not (cut / "tiny/train_rephrased.parquet").exists()
    resumed = Scripted()
    rephrase(_cfg(cut), generator=resumed)
    assert 0 < resumed.calls < uninterrupted.calls  # only the unfinished chunks were generated again
    assert _outputs(cut) == _outputs(full)
    rows = _outputs(full)["train_rephrased"]
    assert any(r["prompt"][1]["content"].startswith("At the market: ") for r in rows)


def test_changed_checks_rejudge_the_log_and_regenerate_only_what_they_reopen(prepared: tuple[Path, Path]) -> None:
    full, cut = prepared
    rephrase(_cfg(full), generator=Scripted())
    rephrase(_cfg(cut, "rephrase.checks.placeholder.action=off"), generator=Scripted())
    lenient = _outputs(cut)["train_rephrased"]
    assert any(r["prompt"][1]["content"] == PLACEHOLDER for r in lenient)
    again = Scripted()
    rephrase(_cfg(cut), generator=again)  # placeholders rejected again: their chunks reopen and are redone
    assert again.calls > 0
    assert _outputs(cut) == _outputs(full)
    never = Scripted(fail_after=0)
    rephrase(_cfg(cut, "rephrase.on_failure=drop"), generator=never)  # judging only: no generation at all
    dropped = pq.read_table(cut / "tiny/train_rephrased.parquet").to_pylist()
    assert len(dropped) < 64 and never.calls == 0


def test_a_generation_setting_change_starts_over(prepared: tuple[Path, Path]) -> None:
    full, _ = prepared
    first = Scripted()
    rephrase(_cfg(full), generator=first)
    second = Scripted()
    rephrase(_cfg(full, "rephrase.temperature=0.9"), generator=second)
    assert second.calls == first.calls


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rephrase.on_failure=dorp", "rephrase.on_failure='dorp': must be one of keep_original, drop"),
        ("rephrase.checks.numbers.action=rejct", "rephrase.checks.numbers.action='rejct': must be one of reject"),
        ("rephrase.top_p=0", "rephrase.top_p=0: must be in (0, 1]"),
    ],
)
def test_bad_rephrase_settings_stop_before_any_generation(
    prepared: tuple[Path, Path], override: str, message: str
) -> None:
    full, _ = prepared
    never = Scripted(fail_after=0)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        rephrase(_cfg(full, override), generator=never)
    assert never.calls == 0 and not (full / "tiny/train_rephrase_raw.jsonl").exists()


def test_bad_drop_reason_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"validate.drop=\['dupe'\]: must be a list of .* \(unknown: dupe\)"):
        prepare(_cfg(tmp_path, "validate.drop=[dupe]"))


def test_a_lower_retry_limit_trims_the_log_without_generating(prepared: tuple[Path, Path]) -> None:
    full, cut = prepared
    rephrase(_cfg(full, "rephrase.max_retries=0"), generator=Scripted())
    rephrase(_cfg(cut), generator=Scripted())
    never = Scripted(fail_after=0)
    rephrase(_cfg(cut, "rephrase.max_retries=0"), generator=never)
    assert never.calls == 0 and _outputs(cut) == _outputs(full)
