"""Fixtures for the verl plug-in tests: the tiny model/tokenizer and rollouts as both backends see them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase
from verl import DataProto

from corewarding.lm.rollout import RolloutBatch
from corewarding.tiny.model import build_tiny_model

GROUND_TRUTHS = {"q0": "5", "q1": "8"}
# Answers per question and view: votes, a tie (q1 original: 7 and 8 twice each, 7 first), empty answers, and a
# teacher that votes nothing for q1.
ANSWERS = {
    "original": {"q0": ["5", "5", "6", ""], "q1": ["7", "8", "8", "7"]},
    "rephrased": {"q0": ["6", "6", "5", "x"], "q1": ["8", "8", "8", "7"]},
    "teacher": {"q0": ["5", "6", "5", "5"], "q1": ["", "", "", ""]},
    # Co-rewarding-III's teacher on each view: on x' it votes 5 for q0 and nothing for q1; on x it votes 6 for q0
    # and 8 for q1 (a tie of 8 and 7, 8 first)
    "teacher_rephrased": {"q0": ["5", "5", "6", "5"], "q1": ["", "", "", ""]},
    "teacher_original": {"q0": ["6", "6", "5", ""], "q1": ["8", "7", "7", "8"]},
}


def response_text(answer: str) -> str:
    return f"so the answer is \\boxed{{{answer}}}" if answer else "no idea"


@pytest.fixture(scope="session")
def tiny_dir(artifacts_dir: Path) -> Path:
    return build_tiny_model(artifacts_dir / "tiny-model-sft0")


@pytest.fixture(scope="session")
def tokenizer(tiny_dir: Path) -> PreTrainedTokenizerBase:
    tok = AutoTokenizer.from_pretrained(tiny_dir, padding_side="left")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


@pytest.fixture(scope="session")
def tiny_model(tiny_dir: Path) -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()


@dataclass
class Rollouts:
    """One step's rollouts of one view, as tensors (the local RolloutBatch) and as verl rows."""

    view: str
    batch: RolloutBatch

    def data_proto(self, verl_uid: Callable[[str], str], group: Callable[[str], str]) -> DataProto:
        b = self.batch
        n = len(b.uids)
        return DataProto(
            batch=TensorDict(
                {
                    "prompts": b.prompt_ids,
                    "responses": b.response_ids,
                    "attention_mask": torch.cat([b.prompt_mask, b.response_mask], dim=1),
                    "response_mask": b.response_mask,
                },
                batch_size=n,
            ),
            non_tensor_batch={
                "uid": np.asarray([verl_uid(u) for u in b.uids], dtype=object),
                "cr_view": np.asarray([self.view] * n, dtype=object),
                "cr_group": np.asarray([group(u) for u in b.uids], dtype=object),
                "reward_model": np.asarray([{"ground_truth": t} for t in b.ground_truths], dtype=object),
            },
        )


def _encode(tokenizer: PreTrainedTokenizerBase, texts: list[str], width: int, left: bool) -> torch.Tensor:
    pad = tokenizer.pad_token_id
    rows = []
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][:width]
        padding = [pad] * (width - len(ids))
        rows.append(padding + ids if left else ids + padding)
    return torch.tensor(rows)


@pytest.fixture(scope="session")
def make_rollouts(tokenizer: PreTrainedTokenizerBase) -> Callable[[str], Rollouts]:
    """Rollouts of a view: responses end in EOS, right-padded; texts decoded as the local backend decodes them."""

    def make(view: str) -> Rollouts:
        uids, truths, answers = [], [], []
        for q, ans in ANSWERS[view].items():
            uids += [q] * len(ans)
            truths += [GROUND_TRUTHS[q]] * len(ans)
            answers += ans
        prompts = [f"<|im_start|>user\nquestion {u} ({view})<|im_end|>\n<|im_start|>assistant\n" for u in uids]
        prompt_ids = _encode(tokenizer, prompts, 24, left=True)
        width = 24
        eos = tokenizer.eos_token_id
        response_ids = torch.full((len(uids), width), tokenizer.pad_token_id)
        mask = torch.zeros((len(uids), width), dtype=torch.long)
        for i, a in enumerate(answers):
            ids = tokenizer(response_text(a), add_special_tokens=False)["input_ids"][: width - 1]
            ids = [*ids, eos]
            response_ids[i, : len(ids)] = torch.tensor(ids)
            mask[i, : len(ids)] = 1
        texts = tokenizer.batch_decode(response_ids, skip_special_tokens=True)  # as rollout.generate does
        batch = RolloutBatch(
            view=view, uids=uids, ground_truths=truths, prompt_ids=prompt_ids,
            prompt_mask=(prompt_ids != tokenizer.pad_token_id).long(), response_ids=response_ids,
            response_mask=mask, texts=texts, truncated=[False] * len(uids),
        )  # fmt: skip
        return Rollouts(view, batch)

    return make


@pytest.fixture(scope="session")
def make_training_batch(make_rollouts: Callable[[str], Rollouts]) -> Callable[[list[str]], DataProto]:
    """A post-rollout verl batch as fit() has it: extra_info carries view and question, cr_row the rollout order."""

    def make(views: list[str]) -> DataProto:
        parts = []
        for view in views:
            r = make_rollouts(view)
            part = r.data_proto(lambda u, v=view: f"{u}/{v}", lambda u: u)
            for key in ("cr_view", "cr_group"):
                part.non_tensor_batch.pop(key)
            part.non_tensor_batch["extra_info"] = np.asarray(
                [{"cr_view": view, "cr_pair": int(u[1:])} for u in r.batch.uids], dtype=object
            )
            parts.append(part)
        batch = DataProto.concat(parts)
        batch.non_tensor_batch["cr_row"] = np.array(list(range(len(batch))), dtype=object)
        return batch

    return make
