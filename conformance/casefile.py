"""Replayable case files: a JSON description plus a safetensors file of arrays.

Plain data only (no serialised Python objects, nothing executed): the JSON
holds the algorithm, hyperparameters, variant set (canonical JSON), style,
dtype, device, the implementation that failed and why; the arrays (inputs,
parameters, further batch inputs) are plain tensors named ``inputs.X``,
``params.layers.0.W_mlp1``, ``batch.0.x``, and the JSON records the
safetensors file's sha256.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

import numpy as np
from safetensors.numpy import load_file, save_file

from ftspec.spec.variants import VariantSet

from .case import Case

__all__ = ["FORMAT", "read_case", "write_case"]

FORMAT = "ftspec-case/1"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_case(case: Case, path: Path | str, **meta: Any) -> Path:
    """Write ``path`` (JSON) and its ``.safetensors`` sibling; returns the JSON path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, np.ndarray] = {}
    for k, v in case.inputs.items():
        tensors[f"inputs.{k}"] = np.asarray(v).copy(order="C")  # keeps 0-d arrays 0-d
    for k, v in case.params.items():
        tensors[f"params.{k}"] = np.asarray(v).copy(order="C")  # keeps 0-d arrays 0-d
    for i, extra in enumerate(case.batch):
        for k, v in extra.items():
            tensors[f"batch.{i}.{k}"] = np.asarray(v).copy(order="C")  # keeps 0-d arrays 0-d
    tensor_path = path.with_suffix(".safetensors")
    save_file(tensors, str(tensor_path))
    doc = {
        "format": FORMAT,
        "algorithm": case.algorithm,
        "hyper": case.hyper,
        "variant": json.loads(case.variant.to_json()),
        "variant_name": case.variant.describe(),
        "style": case.style,
        "batch": len(case.batch),
        "tensors": tensor_path.name,
        "sha256": _sha256(tensor_path),
        **meta,
    }
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return path


def read_case(path: Path | str) -> tuple[Case, dict[str, Any]]:
    """The case and the JSON's other fields; checks format and checksum."""
    path = Path(path)
    doc = json.loads(path.read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not an ftspec case file (format {doc.get('format')!r}, expected {FORMAT!r})")
    tensor_path = path.parent / doc["tensors"]
    if not tensor_path.exists():
        raise FileNotFoundError(f"{path}: its tensors file {tensor_path} is missing")
    if _sha256(tensor_path) != doc["sha256"]:
        raise ValueError(f"{tensor_path}: sha256 does not match the one recorded in {path}")
    tensors = load_file(str(tensor_path))
    inputs = {k[len("inputs."):]: v for k, v in tensors.items() if k.startswith("inputs.")}
    params = {k[len("params."):]: v for k, v in tensors.items() if k.startswith("params.")}
    batch: list[dict[str, np.ndarray]] = [{} for _ in range(int(doc["batch"]))]
    for k, v in tensors.items():
        if k.startswith("batch."):
            _, i, name = k.split(".", 2)
            batch[int(i)][name] = v
    case = Case(doc["algorithm"], {k: int(v) for k, v in doc["hyper"].items()},
                VariantSet.from_json(doc["variant"]), inputs, params, batch, doc.get("style", "well-scaled"))
    return case, doc


def reproducer(path: Path | str, impl: Optional[str] = None, device: Optional[str] = None,
               dtype: Optional[str] = None) -> str:
    """The command that replays a case file."""
    parts = ["ftspec", "replay", str(path)]
    if impl:
        parts += ["--impl", impl]
    if dtype:
        parts += ["--dtype", dtype]
    if device:
        parts += ["--device", device]
    return " ".join(parts)
