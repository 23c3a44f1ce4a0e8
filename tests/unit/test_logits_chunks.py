"""Per-token logits statistics computed in token chunks equal the one-shot computation, and only a chunk at a time
is upcast (the verl self-certainty pass at 16 x 3,584 x 151,936 would otherwise copy all logits to fp32)."""

from __future__ import annotations

import pytest
import torch

from corewarding.methods.logits_rewards import (
    _self_certainty,
    chunked_over_tokens,
    masked_sequence_mean,
    token_self_certainty,
)


def _logits(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(3, 37, 50, generator=gen) * 4
    z[2, 30:] = 0.0  # padded positions (rows shorter than the batch): constant logits
    z[1, 20:] = -1e4  # masked positions with extreme values must not leak into neighbours
    return z.to(dtype)


@pytest.mark.parametrize("chunk", [1, 7, 16, 37, 111, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_self_certainty_equals_one_shot(chunk: int, dtype: torch.dtype) -> None:
    z = _logits(dtype)
    reference = z.float().logsumexp(-1) - z.float().mean(-1)  # the definition, on a full fp32 copy
    got = token_self_certainty(z, chunk_tokens=chunk)
    assert got.dtype == torch.float32 and got.shape == (3, 37)
    torch.testing.assert_close(got, reference, rtol=0, atol=1e-5)
    torch.testing.assert_close(got, token_self_certainty(z, chunk_tokens=None), rtol=0, atol=1e-5)
    mask = torch.ones(3, 37, dtype=torch.long)
    mask[2, 30:] = 0
    mask[1, 20:] = 0
    torch.testing.assert_close(masked_sequence_mean(got, mask), masked_sequence_mean(reference, mask))


def test_verl_shape_one_by_tokens_by_vocab() -> None:
    z = _logits().reshape(1, -1, 50)  # verl's remove-padding logits: (1, total tokens, vocab)
    torch.testing.assert_close(token_self_certainty(z, 10), _self_certainty(z), rtol=0, atol=1e-5)


def test_only_one_chunk_is_upcast_at_a_time() -> None:
    seen: list[tuple[tuple[int, ...], torch.dtype]] = []

    def recording(z: torch.Tensor) -> torch.Tensor:
        seen.append((tuple(z.shape), z.dtype))
        return _self_certainty(z)

    z = _logits(torch.bfloat16)
    chunked_over_tokens(recording, z, 16)
    assert seen == [((16, 50), torch.bfloat16)] * 6 + [((15, 50), torch.bfloat16)]  # 111 = 6 x 16 + 15


def test_the_verl_probe_returns_the_chunked_statistic() -> None:
    from corewarding.training.verl.worker import LogitsStatisticsProbe  # imports verl: kept off the fast tests above

    z = _logits(torch.bfloat16).reshape(1, -1, 50).requires_grad_(True)
    out = LogitsStatisticsProbe(["self_certainty"], chunk_tokens=16)(student_logits=z)
    torch.testing.assert_close(out["self_certainty"], _self_certainty(z.detach()), rtol=0, atol=1e-5)
    assert not out["self_certainty"].requires_grad
