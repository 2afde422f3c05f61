"""Reading the golden fixtures: the manifest, its cases, their tensors.

The golden fixtures (``ftspec.fixtures``: catalogue, generator, data) sit in
the layer above the harness, yet the harness replays them
(``fixture_replay.py``). So the code that reads them lives here, below both:
``ftspec.fixtures`` re-exports it, and the harness never imports
``ftspec.fixtures``. The file layout is ``fixtures/FORMAT.md``.

Each case is one safetensors file (``tensorfile.py``) listed with its sha256
in ``manifest.json``, which carries its own checksum::

    from ftspec.conformance.core.fixture_files import iter_cases
    for case in iter_cases():            # checks every file's sha256
        case.algorithm, case.hyper, case.variant, case.inputs, case.params
        case.expected["P"], case.bounds["float32"]["P"]
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

import numpy as np

from ftspec.spec.variants import VariantSet

from .tensorfile import TensorFileError, loads

__all__ = [
    "BOUND_DTYPES",
    "FORMAT",
    "MANIFEST",
    "SELF_SUM_KEY",
    "ZERO_SUM",
    "FixtureCase",
    "FixtureError",
    "data_dir",
    "iter_cases",
    "load_case",
    "load_manifest",
    "manifest_self_check",
    "tensor_listing",
]

#: the manifest's ``format``: the generator writes it, the reader accepts only it
FORMAT = "ftspec-fixtures/2"
MANIFEST = "manifest.json"
#: the dtypes each output has a bound for (``bound.<dtype>.<output>``)
BOUND_DTYPES = ("float64", "float32")
#: the manifest's own checksum: sha256 of the file with this field's value set to ``ZERO_SUM``
SELF_SUM_KEY = "manifest_sha256"
ZERO_SUM = "0" * 64


class FixtureError(ValueError):
    """A fixture directory, manifest or file that is missing, corrupt or inconsistent."""


def data_dir() -> Path:
    """The bundled fixtures: the ``data`` directory of the ``ftspec.fixtures`` package.

    Located with ``importlib.util.find_spec``, which finds the package
    without running its code (the harness imports nothing from the layer
    above it); works for an editable install and for a wheel.
    """
    spec = importlib.util.find_spec("ftspec.fixtures")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise FixtureError("the ftspec.fixtures package is not installed, so there are no bundled fixtures "
                           "(pass the fixtures directory explicitly)")
    return Path(locations[0]).resolve() / "data"


def _dir(directory: Optional[Path | str]) -> Path:
    return Path(directory) if directory is not None else data_dir()


def manifest_self_check(data: bytes) -> Optional[str]:
    """None if the manifest's bytes match its own ``manifest_sha256``, else what is wrong."""
    key = f'"{SELF_SUM_KEY}": "'.encode()
    at = data.find(key)
    if at < 0 or data.find(key, at + 1) >= 0:
        return f"no single {SELF_SUM_KEY!r} field"
    start = at + len(key)
    recorded = data[start:start + 64]
    if len(recorded) != 64 or data[start + 64:start + 65] != b'"':
        return f"{SELF_SUM_KEY} is not 64 hex digits"
    zeroed = data[:start] + ZERO_SUM.encode() + data[start + 64:]
    actual = hashlib.sha256(zeroed).hexdigest()
    if recorded.decode("latin-1") != actual:
        return (f"content does not match its {SELF_SUM_KEY} (recorded {recorded.decode('latin-1')[:16]}…, "
                f"actual {actual[:16]}…)")
    return None


def load_manifest(directory: Optional[Path | str] = None, *, check: bool = True) -> dict[str, Any]:
    """The parsed ``manifest.json`` of ``directory`` (default: the bundled set).

    With ``check`` (default) the manifest's own checksum is verified first.
    """
    path = _dir(directory) / MANIFEST
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FixtureError(f"{path}: cannot read the manifest ({exc.strerror or exc})") from None
    if check:
        problem = manifest_self_check(data)
        if problem:
            raise FixtureError(f"{path}: {problem}")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FixtureError(f"{path}: not valid UTF-8 JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise FixtureError(f"{path}: format {got!r}, expected {FORMAT!r}")
    return doc


@dataclass(frozen=True)
class FixtureCase:
    """One golden case, its arrays as NumPy (reals float64, tokens int64, masks bool).

    ``variant_label`` and the paper's place come from the manifest's shared
    ``variants`` and ``algorithms`` tables.
    """

    id: str
    algorithm: str
    hyper: dict[str, int]
    variant: VariantSet
    variant_label: str
    kind: str
    description: str
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    #: {"float64" | "float32": {output: allowed |got − expected| per element}}
    bounds: dict[str, dict[str, np.ndarray]]
    record: Mapping[str, Any] = field(repr=False, default_factory=dict)
    path: Optional[Path] = None


def tensor_listing(record: Mapping[str, Any]) -> dict[str, tuple[str, list[int]]]:
    """Every tensor a case's file holds, ``{name: (safetensors dtype, shape)}``, from its manifest record.

    ``inputs.<k>`` and ``expected.<o>`` as ``inputs``/``outputs`` list them
    (``[kind, dtype, shape]``), ``params.<p>`` F32 of the listed shape, and
    ``bound.float64.<o>``, ``bound.float32.<o>`` F64 of the output's shape
    (FORMAT.md §2-3).
    """
    out: dict[str, tuple[str, list[int]]] = {}
    for k, (_, dtype, shape) in record["inputs"].items():
        out[f"inputs.{k}"] = (dtype, list(shape))
    for k, shape in record["params"].items():
        out[f"params.{k}"] = ("F32", list(shape))
    for k, (_, dtype, shape) in record["outputs"].items():
        out[f"expected.{k}"] = (dtype, list(shape))
        for dt in BOUND_DTYPES:
            out[f"bound.{dt}.{k}"] = ("F64", list(shape))
    return out


def _as_float64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def load_case(record: Mapping[str, Any], directory: Optional[Path | str] = None, *,
              variants: Optional[Mapping[str, Any]] = None, check: bool = True) -> FixtureCase:
    """The case a manifest record describes; with ``check``, its file's sha256 and tensors are verified.

    ``variants`` is the manifest's ``variants`` table (read from ``directory``'s
    manifest when not given). Real arrays come back as float64 (the file's
    F32 inputs and parameters widen exactly).
    """
    if variants is None:
        variants = load_manifest(directory, check=check)["variants"]
    path = _dir(directory) / str(record["file"])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FixtureError(f"{path.name}: cannot read ({exc.strerror or exc})") from None
    if check and hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise FixtureError(f"{path.name}: sha256 does not match the manifest")
    try:
        tensors, _ = loads(data)
    except TensorFileError as exc:
        raise FixtureError(f"{path.name}: {exc}") from None
    if check:
        listed = tensor_listing(record)
        if set(listed) != set(tensors):
            raise FixtureError(f"{path.name}: tensors {sorted(set(tensors) ^ set(listed))} are in only one of "
                               "the file and the manifest")
    inputs, params, expected = {}, {}, {}
    bounds: dict[str, dict[str, np.ndarray]] = {}
    for name, arr in tensors.items():
        role, _, key = name.partition(".")
        arr = _as_float64(arr)
        if role == "inputs":
            inputs[key] = arr
        elif role == "params":
            params[key] = arr
        elif role == "expected":
            expected[key] = arr
        elif role == "bound":
            dtype, _, out = key.partition(".")
            bounds.setdefault(dtype, {})[out] = arr
        else:
            raise FixtureError(f"{path.name}: unexpected tensor {name!r}")
    v_hash = str(record["variant"])
    if v_hash not in variants:
        raise FixtureError(f"{path.name}: variant {v_hash} is not in the manifest's variants table")
    v_record = variants[v_hash]
    variant = VariantSet.from_json(v_record["json"])
    if variant.hash != v_hash:
        raise FixtureError(f"{path.name}: variant hash {v_hash} does not match its JSON ({variant.hash})")
    return FixtureCase(
        id=str(record["id"]), algorithm=str(record["algorithm"]),
        hyper={k: int(v) for k, v in record["hyper"].items()}, variant=variant,
        variant_label=str(v_record["label"]), kind=str(record["kind"]),
        description=str(record["description"]), inputs=inputs, params=params, expected=expected,
        bounds=bounds, record=record, path=path)


def iter_cases(directory: Optional[Path | str] = None, *, algorithms: Optional[Iterable[str]] = None,
               check: bool = True) -> Iterator[FixtureCase]:
    """Every case of ``directory`` (default: the bundled set), in manifest order.

    Raises ``FixtureError`` at the first missing or corrupt file (with
    ``check``); ``ftspec fixtures verify`` lists every problem at once.
    """
    manifest = load_manifest(directory, check=check)
    wanted = set(algorithms) if algorithms else None
    for record in manifest["cases"]:
        if wanted is None or record["algorithm"] in wanted:
            yield load_case(record, directory, variants=manifest["variants"], check=check)
