"""Nested training state (optimiser, scheduler, RNG) as a safetensors file plus a JSON file: nothing is unpickled.

``encode`` walks dicts, lists, tuples, tensors, NumPy arrays and JSON scalars; every tensor goes to the safetensors
file under a generated name and is referenced from the JSON. ``decode`` reverses it exactly (tensors bit for bit, floats
through JSON's shortest round-trip repr). Anything else (a function, a custom class) is refused when saving, so a
checkpoint can only ever hold data, and reading one can never run code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

TENSOR, NDARRAY, TUPLE, ITEMS = "__tensor__", "__ndarray__", "__tuple__", "__items__"
_SCALARS = (str, int, float, bool, type(None))


def encode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """A JSON-able form of ``obj``; its tensors are added to ``tensors`` (copied, so none share memory)."""
    if isinstance(obj, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = obj.detach().cpu().clone().contiguous()
        return {TENSOR: name}
    if isinstance(obj, np.ndarray):
        return {NDARRAY: obj.tolist(), "dtype": str(obj.dtype), "shape": list(obj.shape)}
    if isinstance(obj, tuple):
        return {TUPLE: [encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [encode(v, tensors) for v in obj]
    if isinstance(obj, dict):  # keys kept with their types (the optimiser's are ints)
        return {ITEMS: [[encode(k, tensors), encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, _SCALARS):
        return obj
    raise TypeError(f"cannot store a {type(obj).__name__} in a checkpoint (only tensors, arrays and JSON values)")


def decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The inverse of ``encode``; raises ValueError or KeyError on a structure ``encode`` never writes."""
    if isinstance(obj, list):
        return [decode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if TENSOR in obj:
            return tensors[str(obj[TENSOR])]
        if NDARRAY in obj:
            return np.asarray(obj[NDARRAY], dtype=np.dtype(str(obj["dtype"]))).reshape(obj["shape"])
        if TUPLE in obj:
            return tuple(decode(v, tensors) for v in obj[TUPLE])
        if ITEMS in obj:
            return {decode(k, tensors): decode(v, tensors) for k, v in obj[ITEMS]}
        raise ValueError(f"unexpected object with keys {sorted(obj)}")
    if isinstance(obj, _SCALARS):
        return obj
    raise ValueError(f"unexpected {type(obj).__name__}")


def save_state(obj: Any, tensors_path: Path, json_path: Path) -> None:
    """Write ``obj`` as ``tensors_path`` (safetensors) and ``json_path`` (its structure)."""
    tensors: dict[str, torch.Tensor] = {}
    structure = encode(obj, tensors)
    save_file(tensors, str(tensors_path))
    json_path.write_text(json.dumps({"version": 1, "state": structure}))


def load_state(tensors_path: Path, json_path: Path) -> Any:
    """Read what ``save_state`` wrote (safetensors and JSON only: no pickle, no code)."""
    structure = json.loads(json_path.read_text())["state"]
    return decode(structure, load_file(str(tensors_path), device="cpu"))
