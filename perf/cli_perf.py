"""Speed of small commands (issue 15, item 8), baseline and ours measured in the same run.

1. ``corewarding rewards score`` on a 16-row file, whole process (median of 5; target < 0.5 s);
2. rescoring 100,000 rows with majority_voting, co_rewarding_1 and co_rewarding_3: ours (``rescore.score_file``:
   read, validate, score, write, summary) against a plain baseline written from the reference's algorithm as
   docs/methods.md states it (last ``\\boxed{}`` extraction, raw-string ``Counter.most_common`` vote per uid,
   empties dropped), doing the same read and write; both the scoring core alone and the whole file (the two
   alternate, 5 times; medians of wall and CPU seconds; the ratio is of CPU seconds, which other users' load disturbs
   less; target: ours <= 1.1x);
3. a typo in a training override (``train methd=x``), whole process until it exits 2 (median of 3; target < 2 s).

Timings on a shared machine are noisy: the load average is printed beside them. No data needed.
Usage: make cli-bench (.venv/bin/python perf/cli_perf.py)
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corewarding import methods
from corewarding.methods.voting import Voter
from corewarding.rescore import read_rollouts, score_file

SRC = Path(__file__).resolve().parents[1] / "src"
ROWS = 100_000
GROUP = 8
REPEAT = 5  # paired repetitions at 100k rows
CROSS = {
    "majority_voting": {"original": "original"},
    "co_rewarding_1": {"original": "rephrased", "rephrased": "original"},
    "co_rewarding_3": {"original": "teacher_rephrased", "rephrased": "teacher_original"},
}


# --- the reference's algorithm, restated from docs/methods.md section 2 (a plain baseline, not our code) -------------
def ref_extract(text: str) -> str:
    """The string inside the last ``\\boxed{}`` (``\\boxed `` form: up to the next ``$``); '' when there is none."""
    if "\\boxed " in text:
        return text.split("\\boxed ")[-1].split("$")[0]
    start = text.rfind("\\boxed")
    if start < 0:
        return ""  # an \fbox answer cannot be unwrapped either: ''
    depth = 0
    for pos in range(start, len(text)):
        if text[pos] == "{":
            depth += 1
        elif text[pos] == "}":
            depth -= 1
            if depth == 0:
                inner = text[start : pos + 1]
                return inner[len("\\boxed{") : -1] if inner.startswith("\\boxed{") else ""
    return ""


def ref_rewards(rows: list[dict[str, Any]], cross: dict[str, str]) -> list[tuple[float, str]]:
    """Per row of a rewarded view: (1[a = vote of the voting view of its uid, vote non-empty], vote)."""
    answers = [ref_extract(r["response"]) for r in rows]
    pool: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r, a in zip(rows, answers, strict=True):
        pool[(r["uid"], r["view"])].append(a)
    labels: dict[tuple[str, str], str] = {}
    for key, found in pool.items():
        votes = [a for a in found if a and a.strip()]
        labels[key] = Counter(votes).most_common(1)[0][0] if votes else ""
    out = []
    for r, a in zip(rows, answers, strict=True):
        if r["view"] in cross:
            label = labels.get((r["uid"], cross[r["view"]]), "")
            out.append((1.0 if label and a == label else 0.0, label))
    return out


def ref_score_file(src: Path, dst: Path, cross: dict[str, str]) -> None:
    """The baseline's whole file: JSON lines in, rewarded rows out."""
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").split("\n") if line.strip()]
    rewarded = [r for r in rows if r["view"] in cross]
    with dst.open("w", encoding="utf-8") as out:
        for r, (reward, label) in zip(rewarded, ref_rewards(rows, cross), strict=True):
            out.write(json.dumps({**r, "reward": reward, "label": label or None}, ensure_ascii=False) + "\n")


# --- measurement -------------------------------------------------------------------------------------------------
def median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired(ours: Callable[[], object], ref: Callable[[], object], repeat: int) -> dict[str, float]:
    """Alternate the two (so load changes hit both), median wall and CPU seconds of each."""
    wall: dict[str, list[float]] = {"ours": [], "ref": []}
    cpu: dict[str, list[float]] = {"ours": [], "ref": []}
    for _ in range(repeat):
        for name, fn in (("ref", ref), ("ours", ours)):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return {f"{kind}_{name}": statistics.median(v[name]) for kind, v in (("wall", wall), ("cpu", cpu)) for name in v}


def cli(*args: str, cwd: Path, expect: int = 0) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "corewarding.cli", *args], cwd=cwd, env=env, capture_output=True)
    if done.returncode != expect:
        raise SystemExit(f"corewarding {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-400:]}")


def write_rows(path: Path, n: int, views: list[str]) -> None:
    """``n`` rows: groups of 8 per uid and view, answers drawn from a few values, a ~300-character response."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            uid, view = divmod(i // GROUP, len(views))
            answer = ["\\frac{1}{2}", "2", "0.5", "", "x^2+1"][(i * 7 + uid) % 5]
            text = "Let us think step by step. " * 10 + (f"so $\\boxed{{{answer}}}$." if answer else "no answer")
            out.write(json.dumps({"uid": f"q{uid}", "view": views[view], "response": text, "ground_truth": "2"}) + "\n")


def report(label: str, seconds: float, target: str, ok: bool) -> None:
    print(f"{label:<62} {seconds:8.3f} s   {target:<22} {'ok' if ok else 'OVER TARGET'}")


def main() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {cores} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        small = tmp / "16.jsonl"
        write_rows(small, 16, ["original"])
        args = ("rewards", "score", "--method", "majority_voting", "--input", str(small), "--output", str(tmp / "o"))
        cli(*args, cwd=tmp)  # warm the file cache
        seconds = median_s(lambda: cli(*args, cwd=tmp), 5)
        report("rewards score, 16 rows (process, median of 5)", seconds, "< 0.5 s", seconds < 0.5)
        for method, cross in CROSS.items():
            views = list(dict.fromkeys([*cross, *cross.values()]))
            big = tmp / f"{method}.jsonl"
            write_rows(big, ROWS, views)
            spec = methods.get(method)
            rollouts, rows = read_rollouts(big, spec.views)
            assert spec.score is not None
            scorer = spec.score
            got = [(s.reward, s.label or "") for s in scorer(rollouts, Voter()).scored]
            if got != ref_rewards(rows, cross):
                raise SystemExit(f"{method}: our rewards differ from the baseline's")
            timings = {
                "scoring core": paired(
                    lambda r=rollouts, f=scorer: f(r, Voter()), lambda r=rows, c=cross: ref_rewards(r, c), REPEAT
                ),
                "whole file": paired(
                    lambda b=big, m=method: score_file(m, b, tmp / "ours.jsonl"),
                    lambda b=big, c=cross: ref_score_file(b, tmp / "ref.jsonl", c),
                    REPEAT,
                ),
            }
            for what, t in timings.items():
                ratio = t["cpu_ours"] / t["cpu_ref"]
                print(f"{method} {ROWS:,} rows, {what}: baseline {t['wall_ref']:.3f} s wall {t['cpu_ref']:.3f} s CPU; "
                      f"ours {t['wall_ours']:.3f} s wall {t['cpu_ours']:.3f} s CPU = {ratio:.2f}x (target <= 1.1x) "
                      f"{'ok' if ratio <= 1.1 else 'OVER TARGET'}")  # fmt: skip
        seconds = median_s(lambda: cli("train", "methd=x", cwd=tmp, expect=2), 3)
        report("train methd=x: error, exit 2 (process, median of 3)", seconds, "< 2 s", seconds < 2.0)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
