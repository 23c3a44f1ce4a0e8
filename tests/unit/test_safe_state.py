"""Training state as safetensors + JSON: an exact round trip of what the optimiser, scheduler and RNGs hold, and a
refusal to store anything that is not data."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from corewarding.training.local.safe_state import load_state, save_state


def test_optimiser_scheduler_and_rng_state_round_trip_exactly(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.1 + s / 7)
    model(torch.ones(3)).sum().backward()
    optimizer.step()
    scheduler.step()
    state = {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()},
    }
    save_state(state, tmp_path / "t.safetensors", tmp_path / "t.json")
    back = load_state(tmp_path / "t.safetensors", tmp_path / "t.json")

    assert back["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]  # betas stay a tuple, keys ints
    for index, entry in state["optimizer"]["state"].items():
        assert all(torch.equal(back["optimizer"]["state"][index][k], v) for k, v in entry.items())
    assert back["scheduler"] == state["scheduler"]
    assert torch.equal(back["rng"]["torch"], state["rng"]["torch"])
    assert back["rng"]["python"] == state["rng"]["python"]
    numpy_back, numpy_saved = back["rng"]["numpy"], state["rng"]["numpy"]
    assert numpy_back[0] == numpy_saved[0] and numpy_back[2:] == numpy_saved[2:]
    assert numpy_back[1].dtype == numpy_saved[1].dtype and np.array_equal(numpy_back[1], numpy_saved[1])
    random.setstate(back["rng"]["python"])
    np.random.set_state(back["rng"]["numpy"])  # both accept the restored state


def test_anything_but_data_is_refused_when_saving(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="cannot store a function"):
        save_state({"lr_lambda": lambda s: s}, tmp_path / "t.safetensors", tmp_path / "t.json")
