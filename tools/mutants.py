"""`make mutants`: mutation testing of the pure cores, and the score per module group.

mutmut (configured in pyproject's ``[tool.mutmut]``) copies src/ and the tests into mutants/ and runs, for each mutant
of the functions in ``GROUPS``, the fast unit tests that call that function (forked from one warm process: a fraction
of a second a mutant). mutmut never mutates a decorated function (``@torch.no_grad()``, ``@cache``), so the few in
scope (``DECORATED``: the EMA updates) go through cosmic-ray instead, in a copy of the
tree under mutants/cosmic-ray/ (it edits the files it mutates) with one pytest process per mutant. What is left out
(SQL readers, YAML parsing, verl batch plumbing) is named in docs/performance.md.

    python tools/mutants.py            # run both (one worker, nice 10), then print the scores
    python tools/mutants.py --report   # the scores of the last run only

Exits 1 when a group kills less than ``TARGET`` of its mutants not judged equivalent.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET = 0.90
LOG = Path("mutants/run.log")

M, V, R = "corewarding.methods", "corewarding.training.verl", "corewarding.results"
GROUPS: dict[str, list[str]] = {
    "reward methods": [
        f"{M}.majority_voting.x_score__*",
        f"{M}.co_rewarding_1.x_score__*",
        f"{M}.co_rewarding_2.x_score__*",
        f"{M}.co_rewarding_3.x_*",
        f"{M}.gt_grpo.x_score__*",
        f"{M}.entropy.x_sequence_reward__*",
        f"{M}.self_certainty.x_sequence_reward__*",
        f"{M}.logits_rewards.x_*",
        f"{M}.grpo.x_grpo_advantages__*",
    ],
    "EMA and schedule": [
        f"{M}.co_rewarding_2.x_ema_rate__*",
        f"{V}.teacher.x__pairs__*",
        f"{V}.teacher.x_local_shard__*",
    ],
    "votes and labels": [
        f"{M}.voting.x*",
        f"{M}.cross_vote.x_*",
        f"{M}.summary.x_*",
        f"{M}.base.x_*",
        f"{M}.base.xǁScoreResultǁ*",
        f"{V}.hook.x__extra__*",
        f"{V}.hook.x__vote_groups__*",
        f"{V}.hook.x_rm_scores_for__*",
    ],
    "claim and verdict statistics": [
        f"{R}.seed_variance.x*",
        *(
            f"{R}.cell_verdicts.x_{name}__*"
            for name in (
                "_problem_variances",
                "cell_interval",
                "base_interval",
                "verdict_of",
                "in_percent",
                "pooled_variances",
                "borrowed_for",
                "steps_text",
                "seeds_by_key",
            )
        ),
        f"{R}.claims.x_claim_weights__*",
        f"{R}.claim_rule.x_decide__*",
        f"{R}.claims.x__compare__*",
        f"{R}.claims.x__stable__*",
        f"{R}.claims.x_evaluate_claims__*",
        f"{R}.claims.xǁClaimǁcells__*",
    ],
}

# cosmic-ray, for the decorated functions mutmut skips: (group, module file, functions, the tests that kill them)
PYTEST = "python -m pytest -x -q -p no:cacheprovider"
DECORATED: list[tuple[str, str, tuple[str, ...], str]] = [
    (
        "EMA and schedule",
        "src/corewarding/training/verl/teacher.py",
        ("ema_update_shards",),
        f"{PYTEST} tests/unit/verl/test_mutants_verl.py tests/unit/verl/test_teacher.py",
    ),
    (
        "EMA and schedule",
        "src/corewarding/training/local/teacher.py",
        ("ema_update",),
        f"{PYTEST} tests/unit/test_losses.py tests/unit/verl/test_teacher.py",
    ),
]
CR_TREE = Path("mutants/cosmic-ray")
CR_RESULTS = CR_TREE / "results.json"

# Survivors judged equivalent: no input the callers can give tells the mutant from the original (docs/performance.md).
_ZIP = "zip(LABEL_METRICS, values): both always have four items, so strict= changes nothing"
_BY_KEY = "group order only: the one caller (read.paper_comparison) reads the dict with .get"
_NO_EVENTS = "the empty frame of a store without runs is never indexed (len(events) is 0), whatever its columns"
EQUIVALENT: dict[str, str] = {
    f"{M}.co_rewarding_3.x_view_metrics__mutmut_20": _ZIP,
    f"{M}.co_rewarding_3.x_view_metrics__mutmut_23": _ZIP,
    f"{M}.co_rewarding_3.x_view_metrics__mutmut_24": _ZIP,
    f"{M}.gt_grpo.x_score__mutmut_57": "sort(key=None) sorts the Scored tuples by their first field, the unique index",
    f"{M}.logits_rewards.x_masked_sequence_mean__mutmut_2": (
        "mask.to(None) keeps the 0/1 mask's dtype: sums and products are the same numbers (callers pass fp32 values)"
    ),
    f"{V}.hook.x_rm_scores_for__mutmut_10": "as_tensor(order) of an int64 array is int64 without dtype=",
    f"{V}.hook.x_rm_scores_for__mutmut_12": "as_tensor(order) of an int64 array is int64 without dtype=",
    f"{R}.cell_verdicts.x_base_interval__mutmut_3": "low is None alone still returns None: pd.isna(None) is True",
    f"{R}.cell_verdicts.x_seeds_by_key__mutmut_3": "merge on the common columns: wanted[KEY] has only the KEY columns",
    f"{R}.cell_verdicts.x_seeds_by_key__mutmut_5": "merge on the common columns: wanted[KEY] has only the KEY columns",
    f"{R}.cell_verdicts.x_seeds_by_key__mutmut_8": "groupby(sort=None) is sort=False",
    f"{R}.cell_verdicts.x_seeds_by_key__mutmut_10": _BY_KEY,
    f"{R}.cell_verdicts.x_seeds_by_key__mutmut_11": _BY_KEY,
    f"{R}.claims.x__stable__mutmut_25": _NO_EVENTS,
    f"{R}.claims.x__stable__mutmut_26": _NO_EVENTS,
    f"{R}.claims.x__stable__mutmut_27": _NO_EVENTS,
    f"{R}.claims.x__stable__mutmut_28": _NO_EVENTS,
    f"{R}.claims.x__stable__mutmut_29": _NO_EVENTS,
    f"{R}.claims.x__stable__mutmut_36": (
        "collapse_events always returns run_id and step columns, so an empty one filters to the same empty set"
    ),
    f"{R}.claims.x__stable__mutmut_33": "by_step None only on a compare claim; load_claims requires by_step >= 1",
    f"{R}.claims.x__stable__mutmut_45": "fillna(None) leaves NaN, which is below every by_step >= 1 as 0 is",
}

KILLED = {"killed", "timeout"}
# A mutant can turn a loop infinite (``repeat(label)`` without its count): its test then fills memory until this cap
# (of each process's data segment; a test process needs under 1 GiB) makes it fail, instead of the OOM killer picking
# some process of the shared machine.
MEMORY_CAP = 4 << 30


def capped() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))


def group_of(mutant: str) -> str | None:
    if mutant.startswith("cr:"):
        module, function = mutant.split(":")[1:3]
        return next((g for g, m, fs, _ in DECORATED if m == module and function in fs), None)
    for group, patterns in GROUPS.items():
        if any(fnmatch.fnmatchcase(mutant, p) for p in patterns):
            return group
    return None


def results() -> dict[str, str]:
    """Every mutant mutmut knows and its status (killed, survived, no tests, timeout, ...)."""
    out = subprocess.run(
        [str(BIN / "mutmut"), "results", "--all", "true"], capture_output=True, text=True, check=True
    ).stdout
    status = {}
    for line in out.splitlines():
        name, sep, what = line.strip().rpartition(": ")
        if sep:
            status[name] = what
    return status


def cosmic_ray() -> dict[str, str]:
    """Run cosmic-ray on each of ``DECORATED`` in a fresh copy of the tree; the status of each mutant, named
    ``cr:<module file>:<function>:<operator>#<occurrence>``, also written to ``CR_RESULTS``."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    shutil.rmtree(CR_TREE, ignore_errors=True)
    for part in ("src", "tests", "configs"):
        shutil.copytree(part, CR_TREE / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2("pyproject.toml", CR_TREE / "pyproject.toml")
    # the copy's src/ first: the editable install's finder only answers what sys.path does not
    env = {**os.environ, "PYTHONPATH": str((CR_TREE / "src").resolve()), "OMP_NUM_THREADS": "1"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    status: dict[str, str] = {}
    for k, (_, module, functions, tests) in enumerate(DECORATED):
        config, session = f"job{k}.toml", f"job{k}.sqlite"
        (CR_TREE / config).write_text(
            f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = 300.0\nexcluded-modules = []\n'
            f'test-command = "{tests}"\n\n[cosmic-ray.distributor]\nname = "local"\n',
            encoding="utf-8",
        )
        cr = str(BIN / "cosmic-ray")
        # the tests must pass unmutated, or every mutant would count as killed
        subprocess.run([cr, "baseline", config], cwd=CR_TREE, env=env, check=True, preexec_fn=capped)
        subprocess.run([cr, "init", config, session], cwd=CR_TREE, env=env, check=True)
        with use_db(str(CR_TREE / session), WorkDB.Mode.open) as db:  # skip the mutants outside ``functions``
            others = [i.job_id for i in db.pending_work_items if i.mutations[0].definition_name not in functions]
            db.set_multiple_results(others, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="out of scope"))
        run = ["nice", "-n", "10", cr, "exec", config, session]
        subprocess.run(run, cwd=CR_TREE, env=env, check=True, preexec_fn=capped)
        with use_db(str(CR_TREE / session), WorkDB.Mode.open) as db:
            for item, result in db.completed_work_items:
                m = item.mutations[0]
                if result.worker_outcome == WorkerOutcome.SKIPPED:
                    continue
                name = f"cr:{module}:{m.definition_name}:{m.operator_name}#{m.occurrence}"
                if result.worker_outcome != WorkerOutcome.NORMAL:
                    status[name] = f"cosmic-ray {result.worker_outcome}"
                else:
                    status[name] = "survived" if result.test_outcome == TestOutcome.SURVIVED else "killed"
    CR_RESULTS.write_text(json.dumps(status, indent=1, sort_keys=True), encoding="utf-8")
    return status


def report(status: dict[str, str]) -> bool:
    """Print the score of each group and its survivors; True when every group reaches TARGET."""
    ok = True
    rows = []
    for group in GROUPS:
        mine = {name: s for name, s in status.items() if group_of(name) == group}
        killed = sum(s in KILLED for s in mine.values())
        equivalent = [n for n, s in mine.items() if s not in KILLED and n in EQUIVALENT]
        alive = sorted(n for n, s in mine.items() if s not in KILLED and n not in EQUIVALENT)
        total = len(mine)
        score = killed / (total - len(equivalent)) if total > len(equivalent) else 1.0
        ok &= score >= TARGET and total > 0
        rows.append((group, killed, total, len(equivalent), score))
        for name in alive:
            if mine[name] != "not checked":
                print(f"  {mine[name]:<12} {name}")
        unchecked = sum(s == "not checked" for s in mine.values())
        if unchecked:
            print(f"  {group}: {unchecked} mutants not run yet")
    print(f"\n{'group':<30} {'killed':>7} {'total':>6} {'equiv.':>7} {'killed/total':>13} {'excl. equiv.':>13}")
    for group, killed, total, judged, score in rows:
        raw = killed / total if total else 0.0
        print(f"{group:<30} {killed:>7} {total:>6} {judged:>7} {raw:>12.1%} {score:>12.1%}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="print the scores of the last run, run nothing")
    parser.add_argument("--only", nargs="*", help="group names or mutmut name patterns to run, not every group")
    parser.add_argument("--no-cosmic-ray", action="store_true", help="skip (and leave out) the decorated functions")
    args = parser.parse_args(argv)
    if not args.report:
        patterns = [p for name in args.only or GROUPS for p in GROUPS.get(name, [name])]
        start = time.monotonic()
        run = [str(BIN / "mutmut"), "run", "--max-children", "1", *patterns]
        Path("mutants").mkdir(exist_ok=True)
        with open(LOG, "w", encoding="utf-8") as log:  # mutmut's spinner and its per-mutant lines
            nice = ["nice", "-n", "10", *run]
            done = subprocess.run(nice, check=False, stdout=log, stderr=subprocess.STDOUT, preexec_fn=capped)
        print(f"mutmut ran for {time.monotonic() - start:.0f} s (its output: {LOG})")
        if done.returncode != 0:  # e.g. a test that fails unmutated: no mutant was judged
            print(f"mutmut failed (exit {done.returncode}); the end of {LOG} says why", file=sys.stderr)
            return 2
        if not args.no_cosmic_ray and not args.only:
            start = time.monotonic()
            cosmic_ray()
            print(f"cosmic-ray ran for {time.monotonic() - start:.0f} s")
    status = results()
    if not args.no_cosmic_ray and CR_RESULTS.is_file():
        status.update(json.loads(CR_RESULTS.read_text(encoding="utf-8")))
    return 0 if report(status) else 1


if __name__ == "__main__":
    sys.exit(main())
