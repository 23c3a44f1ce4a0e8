"""verl's packed (remove-padding) branch on CPU with sdpa, as every GPU cell and the CPU end-to-end run take it:
the per-token outputs of our logits-statistics probe (``worker.LogitsStatisticsProbe``: Self-Certainty, entropy),
verl's entropy and the log-probs come back from one packed row equal to those of each sequence run alone.

The engine is verl 0.9.1's own ``FSDPEngineWithLMHead`` (``verl/workers/engine/fsdp/transformer_impl.py``), its
``forward_step`` called as ``infer_batch`` calls it, on the unwrapped module (FSDP's sharding does not touch the
layout): ``prepare_model_inputs`` packs the micro-batch's jagged rows into one row with position ids restarting per
sequence and ``attention_mask=None`` (~1182-1260), the module runs with ``use_cache=False`` (~1568), and
``prepare_model_outputs`` (~1412-1421) checks the probe's ``(1, tokens)`` outputs, strips the pack's pad
(``_gather_and_unpad_packed``, the identity on our cells: no Ulysses SP, and ``pad_to_length`` refuses the probe's
``distillation_use_topk``) and splits them per sequence with ``nested_tensor_from_jagged``. transformers then has
to find the sequence boundaries itself, from the position ids (``masking_utils.py`` ~883-888,
``find_packed_sequence_indices``), which it skips when the call has a KV cache: a call without ``use_cache=False``
gets one (``modeling_qwen3.py`` ~394, the config's ``use_cache=True``) and every sequence attends to those before it.
The check is that nothing leaks across the boundaries, and that it would see a leak.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import verl.utils.torch_functional as verl_F
from tensordict import TensorDict
from transformers import Qwen3Config, Qwen3ForCausalLM
from verl.utils import tensordict_utils as tu
from verl.workers.engine.fsdp import transformer_impl

from corewarding.methods.logits_statistics import logits_statistic, statistic_names
from corewarding.training.verl.verl_config import probed_statistics
from corewarding.training.verl.worker import LogitsStatisticsProbe

LENGTHS = (7, 23, 2)  # asymmetric: a long sequence after a short one, and a very short last one
TEMPERATURE = 0.7  # verl scales the logits by the rollout's temperature before the probe and the log-probs
# (probe's statistics, verl's own entropy): the worker's pass for Self-Certainty (``_compute_old_log_prob`` asks
# verl for the entropy, ray_trainer.py ~1300), and every registered statistic through the probe
PASSES = {
    "self_certainty_as_the_worker_runs_it": (probed_statistics("self_certainty"), True),
    "every_statistic_through_the_probe": (tuple(statistic_names()), False),
}
# fp32 throughout: packed and per-sequence differ only in sdpa's summation order (measured: under 3e-6); a
# sequence that attends to the one before it moves its values by orders of magnitude more (see the last test)
ATOL = 1e-4
LEAK = 1e-2


@pytest.fixture(scope="module")
def model() -> Any:
    """A random Qwen3 of tiny-qwen3's shape (2 layers, 2 heads of 64), fp32, sdpa, as the actor module is built."""
    config = Qwen3Config(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        initializer_range=0.1,  # sharper than the default 0.02: attention that is not near-uniform
        use_cache=True,  # the config's default: only the call's use_cache=False keeps the cache out
    )
    config._attn_implementation = "sdpa"  # as verl's override_config sets it
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).eval()
    assert model.config._attn_implementation == "sdpa"
    return model


@pytest.fixture(scope="module")
def sequences() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(0, 256, (n,), generator=generator) for n in LENGTHS]


@pytest.fixture(autouse=True)
def on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's device helpers, as the CPU platform answers them (no platform is activated in this process)."""
    monkeypatch.setattr(transformer_impl, "get_device_id", lambda: "cpu")
    monkeypatch.setattr(transformer_impl, "get_device_name", lambda: "cpu")


def engine(module: Any, remove_padding: bool) -> Any:
    """verl's FSDP engine around ``module`` with what ``forward_step`` reads (``FSDPEngine.__init__`` would build
    the process group, the device mesh and FSDP: not the layout under test). Chunked entropy, as the cells run."""
    e: Any = object.__new__(transformer_impl.FSDPEngineWithLMHead)
    e.module = module
    e.use_remove_padding = remove_padding
    e.use_ulysses_sp = False
    e.pad_to_length, e.pad_to_length_bucket = False, 1024
    e._autocast_dtype = torch.float32  # the fp32 path: no autocast
    e.engine_config = SimpleNamespace(
        entropy_checkpointing=False, entropy_from_logits_with_chunking=True, entropy_from_logits_chunk_size=8
    )
    e.compute_entropy_from_logits = verl_F.entropy_from_logits_with_chunking
    e.get_data_parallel_group = lambda: None
    return e


def micro_batch(sequences: list[torch.Tensor], remove_padding: bool, **flags: Any) -> TensorDict:
    """A micro-batch as verl's engine gets it: jagged input and position ids (each from 0), the switches as
    non-tensor entries (``infer_batch`` sets ``use_remove_padding``; the worker the probe's flags)."""
    data = TensorDict(
        {
            "input_ids": torch.nested.nested_tensor(sequences, layout=torch.jagged),
            "position_ids": torch.nested.nested_tensor([torch.arange(len(s)) for s in sequences], layout=torch.jagged),
        },
        batch_size=[len(sequences)],
    )
    tu.assign_non_tensor(data, use_remove_padding=remove_padding, temperature=TEMPERATURE, pad_token_id=0, **flags)
    return data


def probe_pass(
    model: Any, sequences: list[torch.Tensor], remove_padding: bool, names: tuple[str, ...], verl_entropy: bool
) -> dict[str, list[torch.Tensor]]:
    """The worker's log-prob pass (``corewarding_log_prob_with_stats``: the probe as the loss function, its flags)
    through verl's ``forward_step``: per sequence, the log-probs, each statistic of the probe and, asked for,
    verl's own entropy."""
    data = micro_batch(sequences, remove_padding, calculate_entropy=verl_entropy)
    tu.assign_non_tensor(data, distillation_use_topk=True, distillation_only=False, compute_loss=True)
    probe = LogitsStatisticsProbe(names, chunk_tokens=5)  # chunks that straddle the sequence boundaries
    with torch.no_grad():
        _, out = engine(model, remove_padding).forward_step(data, loss_function=probe, forward_only=True)
    outputs = out["model_output"]
    expected = {"log_probs", *names, *(["entropy"] if verl_entropy else [])}
    assert set(outputs.keys()) == expected
    return {name: list(outputs[name].unbind()) for name in expected}


def per_sequence(model: Any, sequences: list[torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    """The log-probs and every registered statistic with each sequence alone in its own forward: nothing to leak
    from. The log-probs' labels are verl's: the packed row rolled by one (a sequence's last label is the next
    sequence's first token, which verl's response mask drops)."""
    labels = torch.roll(torch.cat(sequences), shifts=-1).split(list(LENGTHS))
    out: dict[str, list[torch.Tensor]] = {name: [] for name in ("log_probs", *statistic_names())}
    with torch.no_grad():
        for ids, label in zip(sequences, labels, strict=True):
            logits = model(input_ids=ids[None], use_cache=False).logits[0] / TEMPERATURE
            out["log_probs"].append(logits.log_softmax(-1).gather(-1, label[:, None])[:, 0])
            for name in statistic_names():
                out[name].append(logits_statistic(name).compute(logits, None))
    return out


def assert_equal_per_sequence(got: dict[str, list[torch.Tensor]], want: dict[str, list[torch.Tensor]]) -> None:
    for name, values in got.items():
        assert [len(v) for v in values] == list(LENGTHS), name
        for i, (g, w) in enumerate(zip(values, want[name], strict=True)):
            gap = (g - w).abs().max().item()
            assert gap <= ATOL, f"{name}, sequence {i} (length {LENGTHS[i]}): off by {gap:.3g} from its own forward"


@pytest.mark.parametrize("names, verl_entropy", PASSES.values(), ids=PASSES.keys())
def test_the_packed_probe_outputs_equal_each_sequence_alone(
    model: Any, sequences: list[torch.Tensor], names: tuple[str, ...], verl_entropy: bool
) -> None:
    got = probe_pass(model, sequences, remove_padding=True, names=names, verl_entropy=verl_entropy)
    assert_equal_per_sequence(got, per_sequence(model, sequences))


def test_the_padded_branch_gives_the_same(model: Any, sequences: list[torch.Tensor]) -> None:
    """verl's padded branch (``use_remove_padding=false``, what the CPU run took before): the same values."""
    names, verl_entropy = PASSES["self_certainty_as_the_worker_runs_it"]
    got = probe_pass(model, sequences, remove_padding=False, names=names, verl_entropy=verl_entropy)
    assert_equal_per_sequence(got, per_sequence(model, sequences))


def token_sum_loss(weights: torch.Tensor) -> Callable[..., tuple[torch.Tensor, dict[str, Any]]]:
    """A loss over the log-probs with a distinct weight per token (so a gradient that mixes tokens shows)."""

    def loss(model_output: dict[str, torch.Tensor], **kwargs: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        return (model_output["log_probs"].values() * weights).sum(), {}

    return loss


def test_the_packed_training_pass_with_gradient_checkpointing_matches(
    model: Any, sequences: list[torch.Tensor]
) -> None:
    """The update's forward and backward on the packed row with gradient checkpointing (verl's
    ``gradient_checkpointing_enable(use_reentrant=False)``, ``_build_module`` ~336): the loss and every gradient
    equal those of the sequences run one at a time without checkpointing. (In training under checkpointing
    transformers turns the cache off itself, ``utils/generic.py`` ~992: only the log-prob passes need verl's flag.)"""
    weights = torch.linspace(0.5, 1.5, sum(LENGTHS))
    packed = Qwen3ForCausalLM(model.config)
    packed.load_state_dict(model.state_dict())
    packed.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    packed.train()
    assert packed.model.gradient_checkpointing
    data = micro_batch(sequences, remove_padding=True, calculate_entropy=False)
    loss, _ = engine(packed, remove_padding=True).forward_step(
        data, loss_function=token_sum_loss(weights), forward_only=False
    )
    loss.backward()

    alone = Qwen3ForCausalLM(model.config)
    alone.load_state_dict(model.state_dict())
    labels = torch.roll(torch.cat(sequences), shifts=-1).split(list(LENGTHS))
    total = torch.zeros(())
    for ids, label, w in zip(sequences, labels, weights.split(list(LENGTHS)), strict=True):
        logits = alone(input_ids=ids[None], use_cache=False).logits[0] / TEMPERATURE
        total = total + (logits.log_softmax(-1).gather(-1, label[:, None])[:, 0] * w).sum()
    total.backward()

    assert abs(loss.item() - total.item()) <= ATOL * sum(LENGTHS)
    grads = dict(alone.named_parameters())
    for name, p in packed.named_parameters():
        want = grads[name].grad
        assert p.grad is not None and want is not None, name
        gap = (p.grad - want).abs().max().item() / max(want.abs().max().item(), 1e-12)
        assert gap <= 1e-4, f"{name}: gradient off by {gap:.3g} (relative) from the per-sequence one"


def test_without_the_boundaries_the_check_sees_the_leak(model: Any, sequences: list[torch.Tensor]) -> None:
    """The same packed row, masked causally over the whole row (an explicit all-ones mask: what a cache or any lost
    boundary amounts to): every sequence after the first moves by more than ``LEAK``, far beyond ``ATOL``."""
    row = torch.cat(sequences)[None]
    positions = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    with torch.no_grad():
        logits = model(input_ids=row, position_ids=positions, attention_mask=torch.ones_like(row), use_cache=False)
    self_certainty = logits_statistic("self_certainty")
    leaked = [self_certainty.compute(x, None) for x in (logits.logits[0] / TEMPERATURE).split(list(LENGTHS))]
    alone = per_sequence(model, sequences)["self_certainty"]
    gaps = [(x - y).abs().max().item() for x, y in zip(leaked, alone, strict=True)]
    assert gaps[0] <= ATOL  # the first sequence has nothing before it
    assert all(gap > LEAK for gap in gaps[1:]), f"a leak moved Self-Certainty by only {gaps}: the check is blind"
