"""One set of inputs for an entry: every ``TensorSpec`` of ``entry.inputs``.

Kinds: real → a float64 array shaped by the style; token → a token ID or a
token sequence; position → a position; mask → a mask (all-False columns only
when the variant's ``empty_query`` is not "error").

Real inputs are the value builder's (``conformance/core/values/``,
``real_input``) for a drawn seed: "wide-range" draws ±10^U(lo, hi);
"near-constant" gives near-constant columns to every input whose rows are a
normalised width (the norm entries' X and a pre-LN layer's X reach a norm
directly; in a post-LN layer X reaches it after the residual sum, and a
decoder's Z not at all, which is harmless); the other styles draw N(0, 1).
Inputs that reach a layer norm never hold a column that rounds to a constant
in the case's dtype.

Training and inference kinds (``_datasets``, ``_sampling``): a ``length``
input → lengths (``lengths``), and the token input it measures (``padded``)
→ a padded dataset (``datasets``); flag → ``flags``; probability →
``probabilities``; variate → ``variates`` (some equal to the entry's
probability, when it has one); distribution → ``distributions``;
temperature → ``temperatures``; rate → ``rates``. A scalar token input of
an entry that also has token sequences (ETraining's mask_token,
EDInference's bos and eos) is, a third of the time each, a token occurring
in them (within the lengths), a token absent from them, or a ``tokens``
draw. Reals of these kinds are exact in the case's dtype. Inputs are drawn
in dependency order (lengths, then what they pad, then what refers to other
inputs) and returned in the entry's order.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from hypothesis import strategies as st

from ftspec.spec.entry import Kind
from ftspec.spec.params import resolve_shape
from ftspec.spec.variants import PAPER, VariantSet

from ..value_flow import INDEX_LIMITS, padded
from ..values import check_style, real_input
from ._budgets import resolve_dtype, resolve_entry
from ._datasets import datasets, flags, lengths, probabilities, rates
from ._masks import masks, paddings
from ._sampling import distributions, temperatures, variates
from ._tokens import positions, token_sequences, tokens
from ._draws import choose, generator, seeds

__all__ = ["inputs"]


@st.composite
def inputs(draw: st.DrawFn, entry: Any, hyper: Mapping[str, int], variant: VariantSet = PAPER, *,
           dtype: str = "float64", style: str = "well-scaled") -> dict[str, np.ndarray]:
    """{input name: array} for ``entry`` with the shapes ``hyper`` gives."""
    e = resolve_entry(entry)
    dtype = resolve_dtype(dtype)
    check_style(style)
    seed = draw(seeds) if any(s.kind == Kind.REAL for s in e.inputs) else 0
    pads = padded(e)
    sequences = [s.name for s in e.inputs if s.kind == Kind.TOKEN and s.shape]
    probability = [s.name for s in e.inputs if s.kind == Kind.PROBABILITY]
    # lengths first, then what does not refer to another input, then what does
    stage = {Kind.LENGTH: 0, Kind.VARIATE: 2}
    order = sorted(e.inputs, key=lambda s: 2 if s.kind == Kind.TOKEN and not s.shape and sequences
                   else stage.get(s.kind, 1))
    out: dict[str, np.ndarray] = {}
    for spec in order:
        shape = resolve_shape(spec.shape, hyper)
        if spec.kind == Kind.REAL:  # the value builder's, for the drawn seed
            out[spec.name] = real_input(e, spec, hyper, variant, seed=seed, dtype=dtype, style=style)
        elif spec.kind == Kind.TOKEN:
            limit = hyper[INDEX_LIMITS[Kind.TOKEN]]
            if spec.name in pads:
                valid = out[pads[spec.name]]
                rows = draw(datasets(limit, valid.reshape(-1).tolist(), shape[-1]))
                out[spec.name] = rows.reshape(shape)
            elif len(shape) == 1:
                out[spec.name] = draw(token_sequences(limit, shape[0]))
            elif shape:  # unpadded rows of sequences
                n_rows = int(np.prod(shape[:-1], dtype=np.int64))
                out[spec.name] = draw(datasets(limit, [shape[-1]] * n_rows, shape[-1])).reshape(shape)
            elif sequences:
                out[spec.name] = draw(_related_token(limit, _occurring(out, sequences, pads)))
            else:
                out[spec.name] = draw(tokens(limit))
        elif spec.kind == Kind.POSITION:
            out[spec.name] = draw(positions(hyper[INDEX_LIMITS[Kind.POSITION]]))
        elif spec.kind == Kind.MASK:
            out[spec.name] = draw(masks(*shape, empty_query=variant.empty_query))
        elif spec.kind == Kind.LENGTH:
            n = int(np.prod(shape, dtype=np.int64))
            out[spec.name] = draw(lengths(n, hyper[spec.bound])).reshape(shape)
        elif spec.kind == Kind.PADDING:
            out[spec.name] = draw(paddings(int(np.prod(shape, dtype=np.int64)), empty_query=variant.empty_query,
                                           window=variant.window))
        elif spec.kind == Kind.FLAG:
            out[spec.name] = draw(flags(shape))
        elif spec.kind == Kind.PROBABILITY:
            out[spec.name] = np.broadcast_to(draw(probabilities(dtype)), shape).copy()
        elif spec.kind == Kind.VARIATE:
            at = float(out[probability[0]].reshape(-1)[0]) if probability else None
            out[spec.name] = draw(variates(shape, dtype, at=at))
        elif spec.kind == Kind.DISTRIBUTION:
            if len(shape) != 1:
                raise ValueError(f"{e.name}: no strategy for distribution {spec.name!r} of shape {shape}")
            out[spec.name] = draw(distributions(shape[0], dtype))
        elif spec.kind == Kind.TEMPERATURE:
            out[spec.name] = np.broadcast_to(draw(temperatures(dtype)), shape).copy()
        elif spec.kind == Kind.RATE:
            out[spec.name] = np.broadcast_to(draw(rates(dtype)), shape).copy()
        else:
            raise ValueError(f"{e.name}: no strategy for input {spec.name!r} of kind {spec.kind!r}")
    return {spec.name: out[spec.name] for spec in e.inputs}


def _occurring(out: Mapping[str, np.ndarray], sequences: list[str], pads: Mapping[str, str]) -> list[int]:
    """The tokens of the drawn sequences, padding excluded."""
    found: set[int] = set()
    for name in sequences:
        x = out[name]
        if name in pads:
            valid = out[pads[name]].reshape(-1)
            rows = x.reshape(len(valid), -1)
            for row, n in zip(rows, valid):
                found.update(int(t) for t in row[: int(n)])
        else:
            found.update(int(t) for t in x.reshape(-1))
    return sorted(found)


@st.composite
def _related_token(draw: st.DrawFn, N_V: int, occurring: list[int]) -> np.ndarray:
    """A token occurring in the sequences, one absent from them, or any (a third each)."""
    which = choose(draw, "related token", {"any": 1, "occurring": 1, "absent": 1})
    absent = [v for v in range(N_V) if v not in occurring]
    pool = {"occurring": occurring, "absent": absent}.get(which)
    if pool:
        return np.array(pool[int(generator(draw(seeds), "related token").integers(0, len(pool)))], dtype=np.int64)
    return draw(tokens(N_V))
