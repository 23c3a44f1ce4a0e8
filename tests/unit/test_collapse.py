"""Collapse detection: each signature found at the hand-computed step, stable runs left alone."""

from __future__ import annotations

import pandas as pd

from corewarding.results.collapse import CollapseRules, detect_collapse


def long(run_id: str, **series: list[float]) -> pd.DataFrame:
    frames = [
        pd.DataFrame({"run_id": run_id, "step": range(1, len(v) + 1), "metric": k, "value": v})
        for k, v in series.items()
    ]
    return pd.concat(frames, ignore_index=True)


RULES = CollapseRules(margin=0.1, reward_high=0.95, cap_fraction=0.9, min_steps=3, window=1)


def test_validation_falling_past_the_margin_from_its_peak() -> None:
    m = long("a", val_accuracy=[0.3, 0.5, 0.45, 0.41, 0.39, 0.6])
    events = detect_collapse(m, {"a": None}, RULES)
    assert events[["rule", "step"]].values.tolist() == [["val_drop", 5]]  # 0.39 < 0.5 - 0.1; 0.41 is not
    assert "peak 0.500 at step 2" in events["detail"][0]


def test_reward_near_one_while_label_accuracy_falls() -> None:
    m = long("mv", reward_mean=[0.6, 0.8, 0.96, 0.97, 0.99], label_accuracy=[0.5, 0.55, 0.5, 0.44, 0.2])
    events = detect_collapse(m, {}, RULES)
    assert events[["rule", "step"]].values.tolist() == [["reward_without_labels", 4]]  # 0.44 < 0.55 - 0.1


def test_an_unbounded_reward_has_its_own_rule_not_the_near_one_rule() -> None:
    """Self-Certainty's reward is in nats (about 13.5): "near 1" would always hold. Its rule: the reward rose more than
    10% above its value at the label accuracy's peak while that accuracy fell."""
    healthy = long("sc", reward_mean=[13.4, 13.5, 13.45, 13.5, 13.48], label_accuracy=[0.6, 0.65, 0.5, 0.55, 0.5])
    assert detect_collapse(healthy, {}, RULES).empty  # labels wobble, the reward stays flat: no event
    sure = long("sc", reward_mean=[13.4, 13.5, 14.0, 14.9, 15.2], label_accuracy=[0.6, 0.65, 0.6, 0.5, 0.4])
    events = detect_collapse(sure, {}, RULES)
    # at step 4: 14.9 >= 13.5 * 1.1 (the reward at the peak, step 2) and 0.5 < 0.65 - 0.1
    assert events[["rule", "step"]].values.tolist() == [["reward_rise_without_labels", 4]]
    entropy = long("ent", reward_mean=[-0.4, -0.3, -0.2, -0.05], label_accuracy=[0.5, 0.6, 0.55, 0.45])
    events = detect_collapse(entropy, {}, RULES)  # negative entropy rising to 0: -0.05 >= -0.3 + 0.03
    assert events[["rule", "step"]].values.tolist() == [["reward_rise_without_labels", 4]]


def test_length_pinned_at_the_cap_for_min_steps() -> None:
    cap = 100.0
    m = long("ent", response_length_mean=[50, 95, 96, 40, 92, 93, 99, 99])  # >= 90 for 3 steps from step 5
    events = detect_collapse(m, {"ent": cap}, RULES)
    assert events[["rule", "step"]].values.tolist() == [["length_at_cap", 5]]


def test_smoothing_ignores_a_one_step_dip_and_stable_runs_have_no_events() -> None:
    rules = CollapseRules(margin=0.1, reward_high=0.95, cap_fraction=0.9, min_steps=3, window=3)
    noisy = long(
        "gt",
        reward_mean=[0.97] * 6,
        label_accuracy=[0.6, 0.6, 0.45, 0.6, 0.6, 0.6],
        val_accuracy=[0.4, 0.5, 0.55, 0.5, 0.52, 0.56],
        response_length_mean=[60.0] * 6,
    )
    assert detect_collapse(noisy, {"gt": 100.0}, rules).empty
    both = pd.concat([noisy, long("x", val_accuracy=[0.5, 0.1])])
    assert detect_collapse(both, {"gt": 100.0}, rules)["run_id"].tolist() == ["x"]
