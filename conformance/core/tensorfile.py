"""A deterministic safetensors writer and a strict reader.

Plain tensors only: no serialised Python objects, no library quirks.

The safetensors format (https://github.com/huggingface/safetensors):

    8 bytes   N, the header length, unsigned 64-bit little-endian
    N bytes   a JSON object: {tensor name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}
              plus an optional "__metadata__": {string: string}; may end in spaces (0x20)
    rest      the tensors' raw little-endian bytes, row-major (C order);
              data_offsets count from the first byte after the header

This writer makes the bytes a pure function of the tensors and metadata:
keys sorted, no spaces in the JSON, the header padded with spaces to a
multiple of 8 bytes, tensors laid out by element size (largest first) and
then by name, so every 8-byte tensor starts 8-byte aligned. The reader
checks everything the format promises (contiguous, non-overlapping
offsets that cover the data exactly, sizes matching shapes) and refuses
anything else with ``TensorFileError``. Files written here load with the
reference ``safetensors`` library too (tests check this).

It lives in the harness (not in ``fixtures/``, which writes the golden
files) because the harness reads them and the layers import one way: the
fixture generator imports it from here.
"""

from __future__ import annotations

import json
import struct
from typing import Mapping

import numpy as np

__all__ = ["DTYPES", "TensorFileError", "dtype_name", "dumps", "loads"]

#: safetensors dtype name -> NumPy dtype (little-endian). Fixtures use these four.
DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "I64": np.dtype("<i8"),
    "BOOL": np.dtype("bool"),
}
_NAMES = {v: k for k, v in DTYPES.items()}
#: largest header the reader accepts (the format's own limit is 100 MB)
MAX_HEADER = 100_000_000


class TensorFileError(ValueError):
    """A byte string that is not a well-formed safetensors file (as this project writes them)."""


def dtype_name(a: np.ndarray) -> str:
    """The safetensors name of ``a``'s dtype (one of ``DTYPES``)."""
    if a.dtype.kind == "f" and a.dtype.itemsize == 8:
        return "F64"
    if a.dtype.kind == "f" and a.dtype.itemsize == 4:
        return "F32"
    if a.dtype.kind == "i" and a.dtype.itemsize == 8:
        return "I64"
    if a.dtype.kind == "b":
        return "BOOL"
    raise TypeError(f"unsupported dtype {a.dtype} (fixtures hold float64, float32, int64 and bool)")


def dumps(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> bytes:
    """The safetensors bytes of ``tensors``: the same input always gives the same bytes."""
    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError(f"invalid tensor name {name!r}")
        a = np.asarray(value)
        kind = dtype_name(a)
        arrays[name] = (kind, np.array(a, dtype=DTYPES[kind], order="C"))  # keeps 0-d shapes
    order = sorted(arrays, key=lambda n: (-DTYPES[arrays[n][0]].itemsize, n))
    header: dict[str, object] = {}
    offset = 0
    chunks = []
    for name in order:
        kind, a = arrays[name]
        data = a.tobytes(order="C")
        header[name] = {"data_offsets": [offset, offset + len(data)], "dtype": kind, "shape": list(a.shape)}
        chunks.append(data)
        offset += len(data)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("safetensors metadata maps strings to strings")
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def loads(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors (NumPy arrays, native byte order, copied out) and metadata of a safetensors byte string."""
    if len(data) < 8:
        raise TensorFileError(f"{len(data)} bytes: too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER or 8 + n > len(data):
        raise TensorFileError(f"header length {n} does not fit in a file of {len(data)} bytes")
    raw = data[8:8 + n]
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TensorFileError(f"header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise TensorFileError("header is not a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise TensorFileError("__metadata__ must map strings to strings")
    body = memoryview(data)[8 + n:]
    spans = []
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise TensorFileError(f"tensor {name!r}: expected keys dtype, shape, data_offsets; got {info!r:.80}")
        kind, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if kind not in DTYPES:
            raise TensorFileError(f"tensor {name!r}: dtype {kind!r} not one of {sorted(DTYPES)}")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                   for d in shape)):
            raise TensorFileError(f"tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
                or not 0 <= offs[0] <= offs[1]):
            raise TensorFileError(f"tensor {name!r}: bad data_offsets {offs!r}")
        size = DTYPES[kind].itemsize * int(np.prod(shape, dtype=np.int64))
        if offs[1] - offs[0] != size:
            raise TensorFileError(f"tensor {name!r}: {offs[1] - offs[0]} bytes for shape {shape} of {kind} "
                                  f"({size} expected)")
        if offs[1] > len(body):
            raise TensorFileError(f"tensor {name!r}: data_offsets {offs} run past the end of the data "
                                  f"({len(body)} bytes)")
        spans.append((offs[0], offs[1], name))
        arr = np.frombuffer(body[offs[0]:offs[1]], dtype=DTYPES[kind]).reshape(shape)
        if kind == "BOOL" and arr.size and not np.isin(arr.view(np.uint8), (0, 1)).all():
            raise TensorFileError(f"tensor {name!r}: boolean bytes other than 0 and 1")
        out[name] = arr.astype(DTYPES[kind].newbyteorder("="), copy=True)
    spans.sort()
    position = 0
    for begin, end, name in spans:
        if begin != position:
            raise TensorFileError(f"tensor {name!r}: data starts at {begin}, expected {position} "
                                  "(gaps or overlaps between tensors)")
        position = end
    if position != len(body):
        raise TensorFileError(f"{len(body) - position} bytes after the last tensor")
    return out, meta
