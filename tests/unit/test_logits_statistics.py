"""The logits-statistic registry: a statistic and a method declaring it, registered from outside the package, train on
the local backend (a real tiny step) without any edit to the rollout or the trainer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from corewarding.config import compose_config
from corewarding.lm.rollout import RolloutBatch
from corewarding.methods import logits_statistics, registry
from corewarding.methods.logits_rewards import masked_sequence_mean, token_entropy, token_self_certainty
from corewarding.methods.logits_statistics import LogitsStatistic, logits_statistic, register_statistic
from corewarding.methods.registry import MethodSpec, register
from corewarding.training.verl.plan import statistic_gb
from corewarding.training.verl.verl_config import probed_statistics

TOY_STATISTIC, TOY_METHOD = "toy_max_logit", "toy_max_logit_reward"


def max_logit(logits: torch.Tensor) -> torch.Tensor:
    """The largest (temperature-scaled) logit at each position."""
    return logits.float().amax(dim=-1)


@pytest.fixture
def toy_method(monkeypatch: pytest.MonkeyPatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Register the toy statistic and a method reading it, in copies of both registries (undone after the test);
    returns the (statistic, mask) pairs the method's reward was called with."""
    monkeypatch.setattr(logits_statistics, "_STATISTICS", dict(logits_statistics._STATISTICS))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def reward(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        calls.append((values.clone(), mask.clone()))
        return masked_sequence_mean(values, mask)

    register_statistic(LogitsStatistic(TOY_STATISTIC, max_logit, chunked=True, fp32_copies=1))
    register(
        MethodSpec(
            name=TOY_METHOD, kind="logits", views=("original",), rewarded_views=("original",),
            sequence_reward=reward, logits_statistic=TOY_STATISTIC,
        )
    )  # fmt: skip
    return calls


def test_the_built_in_statistics_are_the_method_cores_functions() -> None:
    z = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(0))
    assert logits_statistic("entropy").compute(z).equal(token_entropy(z))
    assert logits_statistic("self_certainty").compute(z).equal(token_self_certainty(z))
    assert logits_statistic("self_certainty").compute(z, 3).equal(token_self_certainty(z, 3))
    assert registry.get("entropy").logits_statistics == ("entropy",)
    assert registry.get("self_certainty").logits_statistics == ("self_certainty",)
    assert registry.get("majority_voting").logits_statistics == ()


def test_registering_refuses_duplicates_and_unknown_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logits_statistics, "_STATISTICS", dict(logits_statistics._STATISTICS))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    with pytest.raises(ValueError, match="already registered"):
        register_statistic(LogitsStatistic("entropy", max_logit))
    with pytest.raises(KeyError, match="unknown logits statistic 'nope'; known: entropy, self_certainty"):
        register(
            MethodSpec(
                "m",
                "logits",
                ("original",),
                ("original",),
                sequence_reward=masked_sequence_mean,
                logits_statistic="nope",
            )
        )
    with pytest.raises(ValueError, match="needs a sequence_reward and a logits_statistic"):
        register(MethodSpec("m", "logits", ("original",), ("original",), logits_statistic="entropy"))
    assert "m" not in registry.names()


def test_a_new_statistic_trains_on_the_local_backend_unedited(
    toy_method: list[tuple[torch.Tensor, torch.Tensor]], artifacts_dir: Path, tmp_path: Path
) -> None:
    from corewarding.training.local.trainer import LocalTrainer  # torch + transformers: imported when used

    cfg = compose_config(
        [
            "experiment=tiny_cpu", "method=entropy", f"method.name={TOY_METHOD}", f"method.reward={TOY_METHOD}",
            f"paths.artifacts_dir={artifacts_dir}", f"paths.runs_dir={tmp_path}", "schedule.total_steps=1",
            "grpo.train_batch_size=2", "grpo.n=2", "grpo.max_response_length=8",
        ]
    )  # fmt: skip
    trainer = LocalTrainer(cfg, tmp_path / "run", progress=False)
    scored: list[tuple[RolloutBatch, torch.Tensor]] = []
    score_tokens = trainer._score_tokens

    def observed(batch: RolloutBatch) -> None:  # the backend's own scoring, then the statistic recomputed by hand
        score_tokens(batch)
        scored.append((batch, expected_max_logits(trainer.policy, batch, float(cfg.grpo.temperature))))

    trainer._score_tokens = observed  # type: ignore[method-assign]  # observes; the backend itself is unchanged
    metrics = trainer.train_step(1)

    ((batch, expected),), ((values, mask),) = scored, toy_method
    assert set(batch.stats) == {"old_logp", "ref_logp", "entropy", TOY_STATISTIC}  # entropy: entropy_mean
    torch.testing.assert_close(batch.stats[TOY_STATISTIC], expected, rtol=0, atol=1e-5)
    assert values.equal(batch.stats[TOY_STATISTIC]) and mask.equal(batch.response_mask)
    assert metrics["reward_mean"] == pytest.approx(float(masked_sequence_mean(expected, mask).mean()), abs=1e-5)


def test_the_verl_worker_probes_a_new_statistic_and_the_plan_counts_it(
    toy_method: list[tuple[torch.Tensor, torch.Tensor]],
) -> None:
    from corewarding.training.verl.worker import LogitsStatisticsProbe  # verl: imported when used

    assert probed_statistics(TOY_METHOD) == (TOY_STATISTIC,)
    assert probed_statistics("self_certainty") == ("self_certainty",) and probed_statistics("entropy") == ()
    z = torch.randn(1, 7, 11, generator=torch.Generator().manual_seed(1))
    out = LogitsStatisticsProbe([TOY_STATISTIC, "self_certainty"], chunk_tokens=3)(student_logits=z)
    assert set(out) == {TOY_STATISTIC, "self_certainty"} and out[TOY_STATISTIC].equal(max_logit(z))
    assert statistic_gb(TOY_STATISTIC, tokens=100, vocab=10, chunk_tokens=4) == 4 * 10 * 4 / 2**30  # one fp32 chunk
    assert statistic_gb(TOY_STATISTIC, tokens=100, vocab=10, chunk_tokens=0) == 100 * 10 * 4 / 2**30


def expected_max_logits(model: torch.nn.Module, batch: RolloutBatch, temperature: float) -> torch.Tensor:
    """The toy statistic from a forward pass of its own: the largest temperature-scaled logit predicting each
    response token."""
    attention = torch.cat([batch.prompt_mask, batch.response_mask], dim=1)
    input_ids = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention, position_ids=(attention.cumsum(-1) - 1).clamp(0))
    p, r = batch.prompt_ids.shape[1], batch.response_ids.shape[1]
    return (logits.logits[:, p - 1 : p - 1 + r].float() / temperature).amax(-1)
