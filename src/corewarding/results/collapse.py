"""Training-collapse detection on per-step metrics (methods.md section 10).

Four signatures, each reported once per run at the first step it holds:
- ``val_drop``: validation accuracy falls more than ``margin`` below its running peak;
- ``reward_without_labels``: a reward in [0, 1] (the voting methods' and GT's) is, smoothed, near 1 while the
  (smoothed) pseudo-label accuracy has fallen more than ``margin`` below its running peak (the reward is being earned
  by agreeing on wrong answers);
- ``reward_rise_without_labels``: the same for an unbounded reward (Self-Certainty's nats, Entropy's negative entropy),
  whose "near 1" means nothing: the smoothed reward has risen more than ``reward_rise`` (relative) above its value at
  the label accuracy's peak while that accuracy fell more than ``margin`` (the model grows sure of wrong answers);
- ``length_at_cap``: the (smoothed) mean response length stays within ``cap_fraction`` of the length cap for
  ``min_steps`` consecutive steps (repetition until truncation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

METRICS = ("val_accuracy", "reward_mean", "label_accuracy", "response_length_mean")
EVENT_COLUMNS = ["run_id", "rule", "step", "detail"]


@dataclass(frozen=True)
class CollapseRules:
    """Thresholds of the three signatures."""

    margin: float = 0.10  # an absolute fall from the running peak (accuracies are fractions)
    reward_high: float = 0.95  # rewards in [0, 1]
    reward_rise: float = 0.10  # unbounded rewards: a rise relative to the reward at the label accuracy's peak
    cap_fraction: float = 0.95
    min_steps: int = 3
    window: int = 5  # rolling mean over training steps for reward, label accuracy and length


Series = tuple[np.ndarray, np.ndarray]  # (steps, values), sorted by step, no NaN
Hit = tuple[int, str] | None
_EMPTY: Series = (np.array([], dtype=int), np.array([], dtype=float))


def _rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean over the last ``window`` values (fewer at the start), like pandas rolling(min_periods=1)."""
    total = np.concatenate([[0.0], np.cumsum(values)])
    end = np.arange(1, len(values) + 1)
    start = np.maximum(end - window, 0)
    return np.asarray((total[end] - total[start]) / (end - start))


def _val_drop(val: Series, rules: CollapseRules) -> Hit:
    steps, values = val
    peak = np.maximum.accumulate(values) if len(values) else values
    fallen = np.flatnonzero(values < peak - rules.margin)
    if not fallen.size:
        return None
    i = int(fallen[0])
    peak_step = int(steps[np.flatnonzero(values == peak[i])[0]])
    return int(steps[i]), f"val_accuracy {values[i]:.3f} vs peak {peak[i]:.3f} at step {peak_step}"


def _reward_without_labels(reward: Series, label: Series, rules: CollapseRules) -> tuple[str, Hit]:
    """``reward_without_labels`` for a reward in [0, 1], else ``reward_rise_without_labels``, and its hit."""
    bounded = not reward[1].size or (reward[1].min() >= 0.0 and reward[1].max() <= 1.0)
    rule = "reward_without_labels" if bounded else "reward_rise_without_labels"
    steps, ri, li = np.intersect1d(reward[0], label[0], return_indices=True)
    if not steps.size:
        return rule, None
    r = _rolling_mean(reward[1][ri], rules.window)
    lab = _rolling_mean(label[1][li], rules.window)
    peak = np.maximum.accumulate(lab)
    if bounded:
        high = r >= rules.reward_high
    else:  # the reward at the step the label accuracy last reached its running peak
        at_peak = r[np.maximum.accumulate(np.where(lab >= peak, np.arange(len(lab)), 0))]
        high = r >= at_peak + rules.reward_rise * np.maximum(np.abs(at_peak), 1e-9)
    fallen = np.flatnonzero(high & (lab < peak - rules.margin))
    if not fallen.size:
        return rule, None
    i = int(fallen[0])
    return rule, (int(steps[i]), f"reward {r[i]:.3f}, label accuracy {lab[i]:.3f} vs peak {peak[i]:.3f}")


def _length_at_cap(length: Series, cap: float | None, rules: CollapseRules) -> Hit:
    steps, values = length
    if cap is None or pd.isna(cap) or len(values) < rules.min_steps:
        return None
    smooth = _rolling_mean(values, rules.window)
    pinned = (smooth >= rules.cap_fraction * cap).astype(int)
    full = np.flatnonzero(np.convolve(pinned, np.ones(rules.min_steps, dtype=int), mode="valid") == rules.min_steps)
    if not full.size:
        return None
    i = int(full[0])
    return int(steps[i]), f"mean length {smooth[i]:.0f} of cap {cap:.0f} for {rules.min_steps}+ steps"


def _by_run(metrics: pd.DataFrame) -> dict[str, dict[str, Series]]:
    """run_id -> metric -> (steps, values), from long rows, NaN dropped."""
    rows = metrics[metrics["metric"].isin(METRICS) & metrics["value"].notna()]
    rows = rows.sort_values(["run_id", "metric", "step"], kind="stable")
    runs, names = rows["run_id"].to_numpy(), rows["metric"].to_numpy()
    steps, values = rows["step"].to_numpy(dtype=int), rows["value"].to_numpy(dtype=float)
    cut = np.flatnonzero((runs[1:] != runs[:-1]) | (names[1:] != names[:-1])) + 1
    out: dict[str, dict[str, Series]] = {}
    for lo, hi in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(runs)]]), strict=True):
        if hi > lo:
            out.setdefault(str(runs[lo]), {})[str(names[lo])] = (steps[lo:hi], values[lo:hi])
    return out


def detect_collapse(
    metrics: pd.DataFrame, caps: dict[str, float | None], rules: CollapseRules = CollapseRules()
) -> pd.DataFrame:
    """Events (run_id, rule, step, detail) from long metrics (run_id, step, metric, value) and each run's length cap.

    >>> m = pd.DataFrame({"run_id": "r", "step": [0, 10, 20], "metric": "val_accuracy", "value": [0.3, 0.5, 0.2]})
    >>> detect_collapse(m, {"r": None})[["rule", "step"]].values.tolist()
    [['val_drop', 20]]
    """
    events: list[tuple[str, str, int, str]] = []
    for run_id, series in sorted(_by_run(metrics).items()):
        reward = series.get("reward_mean", _EMPTY)
        trained = reward[0] > 0  # step 0 holds validation only
        reward_rule, reward_hit = _reward_without_labels(
            (reward[0][trained], reward[1][trained]), series.get("label_accuracy", _EMPTY), rules
        )
        found = {
            "val_drop": _val_drop(series.get("val_accuracy", _EMPTY), rules),
            reward_rule: reward_hit,
            "length_at_cap": _length_at_cap(series.get("response_length_mean", _EMPTY), caps.get(run_id), rules),
        }
        events += [(run_id, rule, hit[0], hit[1]) for rule, hit in found.items() if hit is not None]
    return pd.DataFrame(events, columns=EVENT_COLUMNS).sort_values(["run_id", "step"], ignore_index=True)


def collapse_events(inputs: pd.DataFrame, rules: CollapseRules = CollapseRules()) -> pd.DataFrame:
    """Events from the rows of ``read.collapse_inputs`` (long metrics with each run's length ``cap`` column)."""
    caps = inputs.groupby("run_id")["cap"].first().to_dict() if len(inputs) else {}
    return detect_collapse(inputs, caps, rules)
