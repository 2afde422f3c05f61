"""Replayable case files: a JSON description plus a safetensors file of arrays.

Plain data only (no serialised Python objects, nothing executed): the JSON
holds the algorithm, hyperparameters, variant set (canonical JSON), style,
dtype, device, the implementation that failed and why; the arrays (inputs,
parameters, further batch inputs) are plain tensors named ``inputs.X``,
``params.layers.0.W_mlp1``, ``batch.0.x``, and the JSON records the
safetensors file's sha256.

Case files travel between people, so reading one treats it as untrusted
input (the schema and its bounds: docs/casefile.md). Everything is checked
before anything is allocated: the JSON's size and fields; the tensors file
named by a bare file name in the case file's own directory (no path, no
``..``, no symbolic link, a regular file, bounded size); the safetensors
header, whose every tensor must have the name, shape and dtype the
algorithm's hyperparameters give it, within a bounded total. Only then are
the bytes checksummed and the arrays read. Every refusal is a
``CaseFileError`` with a one-line message.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import struct
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import numpy as np
from safetensors.numpy import load as load_bytes
from safetensors.numpy import save_file

from ftspec.spec.variants import VariantSet

from .case import Case

__all__ = ["FORMAT", "JSON_LIMITS", "LIMITS", "CaseFileError", "read_case", "read_untrusted_bytes",
           "read_untrusted_json", "split_tensors", "write_case"]

FORMAT = "ftspec-case/1"

#: the bounds a case file must keep (docs/casefile.md)
LIMITS = {
    "json_bytes": 1 << 20,  # the case file itself
    "tensor_file_bytes": 64 << 20,  # its safetensors file
    "header_bytes": 1 << 20,  # the safetensors JSON header
    "hyper": 1024,  # each hyperparameter, inclusive
    "batch": 16,  # further input sets
    "elements": 4_000_000,  # elements of all tensors together
    "text": 10_000,  # characters of any string field
}
#: safetensors dtypes a case may hold, and their sizes in bytes
_DTYPES = {"F64": 8, "F32": 4, "I64": 8, "I32": 4, "BOOL": 1}
_TEXT_FIELDS = ("variant_name", "style", "impl", "impl_version", "dtype", "device", "check", "message")


class CaseFileError(ValueError):
    """A case file that is malformed, out of bounds or points outside its directory."""


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


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CaseFileError(f"{what} must be an integer from {low} to {high}, got {_show(value)}")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: the bounds every untrusted JSON document is read under (case files, ``identify --table`` tables,
#: certificates), beside its own size limit
JSON_LIMITS = {
    "depth": 64,  # nesting of arrays and objects
    "containers": 1_000_000,  # "{" and "[" bytes in the file (strings included): counted before parsing
    "number_chars": 64,  # characters of one number as written (digits, sign, point, exponent)
}

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_untrusted_bytes(path: Path | str, *, what: str, limit: int,
                         error: type[ValueError] = CaseFileError) -> bytes:
    """The bytes of ``path``, read as untrusted input: a regular file (a symbolic link is followed,
    but what it names must be a regular file: no FIFO, device such as ``/dev/zero``, socket or
    directory) of at most ``limit`` bytes. The file is checked with ``stat`` before it is opened,
    opened without blocking (a FIFO swapped in meanwhile cannot hang the open), checked again on
    the open descriptor, and at most ``limit + 1`` bytes are ever read. Every refusal is an
    ``error`` with one line naming ``what``."""
    def check(info: os.stat_result) -> None:
        if not stat.S_ISREG(info.st_mode):
            raise error(f"the {what} is not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise error(f"the {what} has {info.st_size} bytes; at most {limit} are allowed")

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    chunks: list[bytes] = []
    try:
        check(os.stat(path))  # before opening: a FIFO or device is not even opened
        fd = os.open(path, flags)
        try:
            check(os.fstat(fd))  # what was opened, whatever the path names by now
            left = limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise error(f"cannot read the {what}: no such file") from None
    except OSError as exc:
        raise error(f"cannot read the {what}: {exc.strerror or exc}") from None
    data = b"".join(chunks)
    if len(data) > limit:
        raise error(f"the {what} grew beyond {limit} bytes while being read")
    return data


def _too_deep(doc: Any, depth: int) -> bool:
    """Whether arrays and objects nest more than ``depth`` levels in ``doc`` (no recursion)."""
    stack = [(doc, 1)] if isinstance(doc, (dict, list)) else []
    while stack:
        node, level = stack.pop()
        if level > depth:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return False


def read_untrusted_json(path: Path | str, *, what: str, limit: int, error: type[ValueError] = CaseFileError,
                        parse_constant: Optional[Callable[[str], Any]] = None,
                        depth: int = JSON_LIMITS["depth"], containers: int = JSON_LIMITS["containers"],
                        number_chars: int = JSON_LIMITS["number_chars"]) -> Any:
    """The JSON document in ``path``, read as untrusted input: ``read_untrusted_bytes`` (a regular
    file of at most ``limit`` bytes), then UTF-8 JSON within ``JSON_LIMITS``: at most ``containers``
    "{" and "[" bytes (counted before parsing, so a file of a million tiny rows is refused unparsed),
    numbers of at most ``number_chars`` characters (a 100,000-digit integer is refused before
    Python converts it), arrays and objects nested at most ``depth`` deep. Every refusal is an
    ``error`` (default ``CaseFileError``) with one line naming ``what`` ("case file", "table file",
    "certificate"); ``parse_constant`` may refuse NaN and infinities. Used by the case files here,
    the tables of ``ftspec identify --table`` and certificates (conformance/session/certificate/reading.py)."""
    data = read_untrusted_bytes(path, what=what, limit=limit, error=error)
    count = data.count(b"{") + data.count(b"[")
    if count > containers:
        raise error(f"the {what} holds {count} '{{' and '[' characters; at most {containers} JSON objects and "
                    "arrays are allowed")

    def number(text: str) -> str:
        if len(text) > number_chars:
            raise error(f"the {what} holds a number written with {len(text)} characters; at most {number_chars} "
                        "are allowed")
        return text

    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=parse_constant,
                         parse_int=lambda s: int(number(s)), parse_float=lambda s: float(number(s)))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"the {what} is not JSON (not valid UTF-8 JSON: {exc})") from None
    except RecursionError:
        raise error(f"the {what} nests arrays and objects too deeply (at most {depth} levels are allowed)") from None
    except MemoryError:
        raise error(f"the {what} is too large to parse") from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, error):  # our own refusal, or parse_constant's
            raise
        raise error(f"cannot read the {what}: {exc}") from None
    if _too_deep(doc, depth):
        raise error(f"the {what} nests arrays and objects more than {depth} levels deep")
    return doc


def _read_doc(path: Path) -> dict[str, Any]:
    doc = read_untrusted_json(path, what="case file", limit=LIMITS["json_bytes"])
    if not isinstance(doc, dict):
        raise CaseFileError(f"the case file must hold a JSON object, not {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise CaseFileError(f"not an ftspec case file (format {_show(doc.get('format'))}, expected {FORMAT!r})")
    for key in _TEXT_FIELDS:
        if key in doc and doc[key] is not None and (not isinstance(doc[key], str)
                                                      or len(doc[key]) > LIMITS["text"]):
            raise CaseFileError(f"field {key!r} must be a string of at most {LIMITS['text']} characters")
    return doc


def _tensor_path(path: Path, name: Any) -> Path:
    """The tensors file: a bare file name, resolved inside the case file's own directory."""
    if not isinstance(name, str) or not name or len(name) > 255:
        raise CaseFileError("field 'tensors' must be a file name")
    if "/" in name or "\\" in name or "\0" in name or name in (".", "..") or os.path.isabs(name):
        raise CaseFileError(f"field 'tensors' must name a file in the case file's own directory, "
                            f"not a path: {_show(name)}")
    home = path.parent.resolve()
    target = home / name
    try:
        info = os.lstat(target)
    except OSError as exc:
        raise CaseFileError(f"its tensors file {name!r} cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise CaseFileError(f"its tensors file {name!r} is a symbolic link; a regular file is required")
    if not stat.S_ISREG(info.st_mode):
        raise CaseFileError(f"its tensors file {name!r} is not a regular file")
    if target.resolve().parent != home:
        raise CaseFileError(f"its tensors file {name!r} lies outside the case file's directory")
    if info.st_size > LIMITS["tensor_file_bytes"]:
        raise CaseFileError(f"its tensors file has {info.st_size} bytes; at most {LIMITS['tensor_file_bytes']} "
                            "are allowed")
    return target


def _expected(doc: Mapping[str, Any]) -> tuple[Any, dict[str, int], VariantSet, int, dict[str, tuple[int, ...]]]:
    """(entry, hyper, variant, batch, {tensor name: shape}) as the algorithm's schema gives them."""
    from ftspec.spec.registry import REGISTRY

    algorithm = doc.get("algorithm")
    if not isinstance(algorithm, str) or algorithm not in REGISTRY:
        raise CaseFileError(f"unknown algorithm {_show(algorithm)}")
    entry = REGISTRY[algorithm]
    hyper_doc = doc.get("hyper")
    if not isinstance(hyper_doc, dict) or set(hyper_doc) != set(entry.hyper):
        got = sorted(hyper_doc) if isinstance(hyper_doc, dict) else _show(hyper_doc)
        raise CaseFileError(f"field 'hyper' must give exactly {algorithm}'s hyperparameters "
                            f"{', '.join(entry.hyper)}; got {got}")
    hyper = {k: _int(hyper_doc[k], f"hyperparameter {k}", 0, LIMITS["hyper"]) for k in entry.hyper}
    if not isinstance(doc.get("variant"), dict):
        raise CaseFileError("field 'variant' must be a JSON object of variant switches")
    try:
        variant = VariantSet.from_json(doc["variant"])
    except (TypeError, ValueError) as exc:
        raise CaseFileError(f"field 'variant': {exc}") from None
    batch = _int(doc.get("batch"), "field 'batch'", 0, LIMITS["batch"])
    try:
        inputs = entry.input_shapes(hyper)
        params = entry.param_shapes(hyper, variant)
    except Exception as exc:  # noqa: BLE001 - a schema the spec cannot resolve for these values
        raise CaseFileError(f"the hyperparameters do not fit {algorithm}: {type(exc).__name__}: {exc}") from None
    shapes = {f"inputs.{k}": v for k, v in inputs.items()}
    shapes.update({f"params.{k}": v for k, v in params.items()})
    for i in range(batch):
        shapes.update({f"batch.{i}.{k}": v for k, v in inputs.items()})
    total = 0
    for name, shape in shapes.items():
        if any(d < 0 for d in shape):
            raise CaseFileError(f"the hyperparameters give tensor {name!r} a negative dimension {shape}")
        total += math.prod(shape)
    if total > LIMITS["elements"]:
        raise CaseFileError(f"the hyperparameters call for {total} elements; at most {LIMITS['elements']} are "
                            "allowed")
    return entry, hyper, variant, batch, shapes


def _check_header(data: bytes, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """The safetensors header lists exactly the expected tensors, with their shapes, and fits the file."""
    if len(data) < 8:
        raise CaseFileError("its tensors file is too short to be safetensors")
    (size,) = struct.unpack("<Q", data[:8])
    if size > LIMITS["header_bytes"] or 8 + size > len(data):
        raise CaseFileError(f"its tensors file has a header of {size} bytes, beyond the file or the limit")
    try:
        header = json.loads(data[8:8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CaseFileError(f"its tensors file's header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise CaseFileError("its tensors file's header is not a JSON object")
    header.pop("__metadata__", None)
    if set(header) != set(shapes):
        missing, extra = sorted(set(shapes) - set(header)), sorted(set(header) - set(shapes))
        raise CaseFileError(f"its tensors file does not hold the algorithm's tensors (missing {missing[:5]}, "
                            f"unexpected {[_show(x) for x in extra[:5]]})")
    body = len(data) - 8 - size
    for name, info in header.items():
        if not isinstance(info, dict) or info.get("dtype") not in _DTYPES:
            raise CaseFileError(f"tensor {name!r}: dtype must be one of {', '.join(_DTYPES)}")
        shape = info.get("shape")
        if not isinstance(shape, list) or tuple(shape) != tuple(shapes[name]):
            raise CaseFileError(f"tensor {name!r} has shape {_show(shape)}; the hyperparameters give "
                                f"{list(shapes[name])}")
        offsets = info.get("data_offsets")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= body
                or offsets[1] - offsets[0] != math.prod(shapes[name]) * _DTYPES[info["dtype"]]):
            raise CaseFileError(f"tensor {name!r}: its data offsets do not fit its shape or the file")


def read_case(path: Path | str) -> tuple[Case, dict[str, Any]]:
    """The case and the JSON's other fields, validated as untrusted input (``CaseFileError``)."""
    path = Path(path)
    try:
        return _read_case(path)
    except CaseFileError as exc:
        raise CaseFileError(f"{path}: {exc}") from None


def _read_case(path: Path) -> tuple[Case, dict[str, Any]]:
    doc = _read_doc(path)
    entry, hyper, variant, batch_n, shapes = _expected(doc)
    sha = doc.get("sha256")
    if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise CaseFileError("field 'sha256' must be 64 lowercase hex digits")
    tensor_path = _tensor_path(path, doc.get("tensors"))
    with open(tensor_path, "rb") as f:  # read no more than the bound, whatever the file became
        data = f.read(LIMITS["tensor_file_bytes"] + 1)
    if len(data) > LIMITS["tensor_file_bytes"]:
        raise CaseFileError("its tensors file grew beyond the limit while being read")
    if hashlib.sha256(data).hexdigest() != sha:
        raise CaseFileError(f"its tensors file {tensor_path.name} does not match the sha256 recorded in the case "
                            "file")
    _check_header(data, shapes)
    try:
        tensors = load_bytes(data)
    except Exception as exc:  # noqa: BLE001 - safetensors' own refusal
        raise CaseFileError(f"its tensors file is not valid safetensors: {exc}") from None
    inputs, params, batch = split_tensors(tensors, batch_n)
    style = doc.get("style") or "well-scaled"
    return Case(entry.name, hyper, variant, inputs, params, batch, style), doc


def split_tensors(tensors: Mapping[str, np.ndarray], batch_n: int, error: type[ValueError] = CaseFileError
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
    """A case's tensors by their names (``inputs.X``, ``params.W_q``, ``batch.3.X``) as (inputs,
    params, batch of ``batch_n`` input sets); ``error`` for a batch index outside the batch. Shared
    by case files and the cases workers send back (conformance/running/wire.py)."""
    inputs = {k[len("inputs."):]: v for k, v in tensors.items() if k.startswith("inputs.")}
    params = {k[len("params."):]: v for k, v in tensors.items() if k.startswith("params.")}
    batch: list[dict[str, np.ndarray]] = [{} for _ in range(batch_n)]
    for k, v in tensors.items():
        if k.startswith("batch."):
            _, i, name = k.split(".", 2)
            if not i.isdigit() or int(i) >= batch_n:
                raise error(f"tensor {k!r} is outside the case's batch of {batch_n}")
            batch[int(i)][name] = v
    return inputs, params, batch


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
