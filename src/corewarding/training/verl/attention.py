"""The attention kernel a verl cell trains with, and why: ``verl.attn_implementation`` and ``verl.remove_padding``.

With remove-padding verl passes one packed row per micro-batch (``position_ids`` restart per sequence). Kernels that
attend per sequence inside it (flash-attn's varlen kernels, flex_attention's block mask) are fast there; sdpa and
eager build a dense (micro-batch x tokens)^2 block-causal mask over the row instead, 2.4-4.4x slower than flex on an
H200 (issue 44's measurement, docs/gpu-plan.md). So ``auto`` takes flash_attention_2 where flash-attn imports (the GPU
image builds it) and padded sdpa elsewhere; ``remove_padding: auto`` packs only for the per-sequence kernels. Packed
sdpa is never chosen silently: only ``verl.remove_padding=true`` with sdpa asks for it, and the dry run warns.

flex_attention is not ``auto``'s fallback: that needs it to train under verl's packed rows, whose length changes
every micro-batch, without recompiling at every step, measured over 20 or more micro-batches on a GPU
(``perf/attention_bench.py``); until a card has shown that, it is a choice, not the default.
"""

from __future__ import annotations

import functools
import importlib
import logging
from dataclasses import dataclass

from corewarding.schemas import VerlConfig

log = logging.getLogger(__name__)

AUTO = "auto"
KERNELS = ("flash_attention_2", "flex_attention", "sdpa", "eager")  # transformers' attn_implementation values
PER_SEQUENCE = ("flash_attention_2", "flex_attention")  # attend per packed sequence, no dense mask
SLOW_PACKING = tuple(f"packed {k}" for k in KERNELS if k not in PER_SEQUENCE)  # a dense mask over the packed row
NO_FLEX_DEFAULT = "flex_attention waits for a GPU to show it trains without recompiling (perf/attention_bench.py)"


@dataclass(frozen=True)
class Attention:
    """A cell's attention: transformers' kernel, whether verl packs micro-batches (remove-padding), and why."""

    kernel: str
    packed: bool
    why: str

    @property
    def name(self) -> str:
        """How the dry run, the cost table and the launch spell it: ``padded sdpa``, ``packed flash_attention_2``."""
        return f"{'packed' if self.packed else 'padded'} {self.kernel}"

    @property
    def slow_packing(self) -> bool:
        """Packed rows through a dense mask: the slow combination the dry run warns about."""
        return self.name in SLOW_PACKING


@functools.cache
def flash_attn_imports() -> bool:
    """Whether flash-attn imports on this machine (it loads its CUDA extension; any failure counts as no)."""
    try:
        importlib.import_module("flash_attn")
    except Exception as exc:  # a wheel built for another torch raises ImportError, OSError, ...
        log.debug("flash-attn does not import here: %s", exc)
        return False
    return True


def choose_attention(verl: VerlConfig, flash_attn: bool | None = None) -> Attention:
    """The kernel and packing of ``verl`` (the config's ``verl`` section); ``flash_attn``: whether flash-attn imports
    (default: try it on this machine)."""
    asked, pack = str(verl.attn_implementation), verl.remove_padding
    if asked == AUTO:
        has_flash = flash_attn_imports() if flash_attn is None else flash_attn
        kernel = "flash_attention_2" if has_flash else "sdpa"
        why = (
            "auto: flash-attn imports here (the paper's kernel, varlen over packed rows)"
            if has_flash
            else "auto: flash-attn does not import here (the GPU image's does: flash_attention_2); sdpa padded, "
            f"as packed it is 2.4-4.4x slower; {NO_FLEX_DEFAULT}"
        )
    else:
        kernel, why = asked, f"verl.attn_implementation={asked}"
    if pack == AUTO:
        packed = kernel in PER_SEQUENCE
        if asked != AUTO:
            why += f", remove_padding auto: {'packed (no mask)' if packed else 'padded (no dense mask over a row)'}"
    else:
        packed = bool(pack)
        why += f", verl.remove_padding={str(packed).lower()}"
    return Attention(kernel, packed, why)
