"""What an entry's registry fields say about where values flow.

Shared by the value builder (``conformance/core/values/``) and the strategies.

Everything here is read from an ``Entry``: its input specs (names, symbolic
shapes, kinds) and its parameter schema under a variant. No algorithm is
named. The strategies use it to know

- which widths are normalised (every γ of the schema with ``affine`` set to
  ``scale_shift``; a γ without its β is an RMSnorm) and so need d ≥ 2 under a
  layer norm without ε or with unbiased variance;
- which widths a tied unembedding forces equal (the width the separate W_u
  would have must be W_e's);
- where attention scores and output logits are formed (each ``W_q``/``W_k``
  pair, ``W_u`` or the tied ``W_e``), and which input feeds them;
- which inputs and embedding tables reach a norm;
- for training and inference entries: which token input each ``length``
  input measures (``padded``: the token input shaped like the lengths plus
  the length's ``bound``), and whether the entry updates parameters (a
  ``rate`` input) or samples (a ``trace``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, TypeVar

from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, Entry, TensorSpec
from ftspec.spec.variants import VariantSet

__all__ = [
    "INDEX_LIMITS",
    "LogitSite",
    "Norm",
    "ScoreSite",
    "differentiates",
    "equal_widths",
    "heads",
    "leaf",
    "logit_site",
    "norms",
    "padded",
    "real_inputs",
    "registered",
    "score_sites",
    "symbolic_schema",
    "tables",
    "updates",
    "width_minimum",
]

#: The hyperparameter that bounds each index kind of input (registry docs).
INDEX_LIMITS = {Kind.TOKEN: "N_V", Kind.POSITION: "ell_max"}


F = TypeVar("F", bound=Callable[..., Any])


def registered(entry: Entry) -> bool:
    """Whether ``entry`` is the registry's entry of its name."""
    return REGISTRY.get(entry.name) is entry


def _memo(fn: F) -> F:
    """Cache ``fn(entry, variant, hyper=None)`` for registry entries (drawing
    calls these for every example). The answers are symbolic, so they depend
    on ``hyper`` only through the structural counts (layers, heads). Results
    are shared: callers must not mutate them."""
    cache: dict[tuple, Any] = {}

    @functools.wraps(fn)
    def wrapper(entry: Entry, variant: VariantSet, hyper: Optional[Mapping[str, int]] = None) -> Any:
        if not registered(entry):
            return fn(entry, variant, hyper)
        key = (entry.name, variant, None if hyper is None else tuple(hyper[k] for k in entry.structural))
        if key not in cache:
            if len(cache) > 4096:
                cache.clear()
            cache[key] = fn(entry, variant, hyper)
        return cache[key]

    return wrapper  # type: ignore[return-value]


def leaf(name: str) -> str:
    """Last component of a flat parameter name: ``layers.0.attn.W_o`` → ``W_o``."""
    return name.rsplit(".", 1)[-1]


def _prefix(name: str) -> str:
    return name[: len(name) - len(leaf(name))]


@_memo
def symbolic_schema(entry: Entry, variant: VariantSet, hyper: Optional[Mapping[str, int]] = None) -> dict:
    """{flat name: symbolic shape}; without ``hyper``, one layer and one head."""
    return entry.param_schema(hyper if hyper is not None else {h: 1 for h in entry.hyper}, variant)


def real_inputs(entry: Entry) -> list[TensorSpec]:
    return [s for s in entry.inputs if s.kind == Kind.REAL]


@dataclass(frozen=True)
class Norm:
    gamma: str
    beta: Optional[str]
    width: str  # symbol
    kind: str  # layer_norm | rms_norm


@_memo
def norms(entry: Entry, variant: VariantSet, hyper: Optional[Mapping[str, int]] = None) -> list[Norm]:
    """Every norm the entry applies under ``variant`` (found through its γ)."""
    full = symbolic_schema(entry, variant.replace(affine="scale_shift"), hyper)
    out = []
    for name, shape in full.items():
        if leaf(name).startswith("gamma"):
            beta = _prefix(name) + "beta" + leaf(name)[len("gamma"):]
            kind = "layer_norm" if beta in full else "rms_norm"
            out.append(Norm(name, beta if beta in full else None, shape[0], kind))
    return out


@_memo
def width_minimum(entry: Entry, variant: VariantSet,
                  hyper: Optional[Mapping[str, int]] = None) -> dict[str, int]:
    """Normalised widths that must be ≥ 2: a layer norm without ε sees zero
    variance in a single entry; unbiased variance divides by d − 1; a head
    (``heads``) without ε needs two rows to keep its columns apart. Entries
    that differentiate (``differentiates``) also need it with ε outside the
    root: at zero variance σ = √v + ε is finite but √'(0) is not, and the
    gradient is 0 · ∞ (NaN in the spec and in every framework)."""
    no_eps = variant.epsilon_placement == "none"
    singular = no_eps or (variant.epsilon_placement == "outside_root" and differentiates(entry))
    out = {n.width: 2 for n in norms(entry, variant)
           if n.kind == "layer_norm" and (singular or variant.variance == "unbiased")}
    if no_eps:
        out.update({symbolic_schema(entry, variant)[w][0]: 2 for w, _ in heads(entry, variant)})
    return out


@_memo
def heads(entry: Entry, variant: VariantSet,
          hyper: Optional[Mapping[str, int]] = None) -> list[tuple[str, Optional[str]]]:
    """(weight, bias) pairs mapping one normalised width into another: a head
    whose output goes through an activation into a norm (BERT's W_f, b_f).
    After a ReLU, or a GELU of a very negative argument, a whole column can be
    exactly 0, which a norm without ε refuses; the parameter strategy makes
    row 1 of such a head the negative of row 0 so that never happens. Under
    ``norm_placement="res_post"`` or ``"sandwich"`` the MLP's first map is such a head too."""
    schema = symbolic_schema(entry, variant)
    widths = {n.width for n in norms(entry, variant)}
    out = []
    # under res_post and sandwich the MLP's output goes straight into a norm: W_mlp2 act(W_mlp1 x + b) (or act(...)
    # itself, one_layer) is an all-zero column when every hidden unit is dead (ReLU, no biases), which
    # a norm without ε refuses, and in a narrow dtype an ε that rounds to 0 (1e-12 in float16) turns into
    # 0/0; a negated row 1 keeps one hidden unit alive
    into_norm = variant.norm_placement in ("res_post", "sandwich")
    for name, shape in schema.items():
        part = leaf(name)
        if part.startswith("W_") and len(shape) == 2 and (
                shape[0] in widths and shape[1] in widths or into_norm and part in ("W_mlp1", "W_mlp3")):
            bias = _prefix(name) + "b_" + part[2:]
            out.append((name, bias if bias in schema else None))
    return out


@_memo
def equal_widths(entry: Entry, variant: VariantSet,
                 hyper: Optional[Mapping[str, int]] = None) -> list[tuple[str, str]]:
    """(follower, leader) widths a tied unembedding, or a one-layer MLP (d_mlp = d_e), forces equal."""
    if variant.mlp == "one_layer" and "mlp" in entry.switches and {"d_mlp", "d_e"} <= set(entry.hyper):
        return [("d_mlp", "d_e"), *_tied_widths(entry, variant)]
    return _tied_widths(entry, variant)


def _tied_widths(entry: Entry, variant: VariantSet) -> list[tuple[str, str]]:
    schema = symbolic_schema(entry, variant)
    separate = symbolic_schema(entry, variant.replace(unembedding="separate"))
    if "W_u" in separate and "W_u" not in schema and "W_e" in schema:
        follower, leader = separate["W_u"][1], schema["W_e"][0]
        if follower != leader:
            return [(follower, leader)]
    return []


def tables(schema: Mapping[str, tuple]) -> list[str]:
    """Parameters indexed by a token or a position: 2-D, last dimension N_V or ell_max."""
    limits = set(INDEX_LIMITS.values())
    return [n for n, s in schema.items() if len(s) == 2 and s[1] in limits]


def _feeding(entry: Entry, symbol: str, *, last: bool) -> Optional[str]:
    found = [s.name for s in real_inputs(entry) if s.shape and s.shape[0] == symbol]
    if not found:
        return None
    return found[-1] if last else found[0]


@dataclass(frozen=True)
class ScoreSite:
    """One attention head: its W_q/b_q/W_k/b_k and the inputs that (most
    directly) feed its queries and keys (None: no input of that width)."""

    prefix: str
    query: Optional[str]
    key: Optional[str]
    width_q: str  # d_model, the width of the primary input
    width_k: str
    #: where W_k/b_k live: the head's own prefix, or under grouped-query attention (``kv_group`` > 1)
    #: the ``kv_heads.{g}.`` it shares with the other heads of its group
    key_prefix: str = ""


@_memo
def score_sites(entry: Entry, variant: VariantSet,
                hyper: Optional[Mapping[str, int]] = None) -> list[ScoreSite]:
    schema = symbolic_schema(entry, variant, hyper)
    sites = []
    for name, shape in schema.items():
        if leaf(name) == "W_q":
            p = kp = _prefix(name)
            if p + "W_k" not in schema:  # GQA: query head h reads kv head ⌊h / G⌋
                outer, _, h = p.rstrip(".").rpartition(".")
                g = 0 if variant.kv_heads == "one" else int(h) // variant.kv_group  # multi-query: the one kv head
                kp = f"{outer[:-len('heads')]}kv_heads.{g}."
            wk = schema[kp + "W_k"][1]
            sites.append(ScoreSite(p, _feeding(entry, shape[1], last=False), _feeding(entry, wk, last=True),
                                   shape[1], wk, kp))
    return sites


@dataclass(frozen=True)
class LogitSite:
    """The unembedding: logits = M x (+ b_u) with M = W_u, or W_eᵀ when tied."""

    matrix: str  # W_u or W_e
    transposed: bool
    bias: Optional[str]
    source: Optional[str]  # the input it multiplies, if any
    width: str


@_memo
def logit_site(entry: Entry, variant: VariantSet,
               hyper: Optional[Mapping[str, int]] = None) -> Optional[LogitSite]:
    schema = symbolic_schema(entry, variant, hyper)
    bias = "b_u" if "b_u" in schema else None
    if "W_u" in schema:
        w = schema["W_u"][1]
        return LogitSite("W_u", False, bias, _feeding(entry, w, last=False), w)
    separate = symbolic_schema(entry, variant.replace(unembedding="separate"), hyper)
    if "W_u" in separate and "W_e" in schema:  # tied: W_u = W_eᵀ
        w = schema["W_e"][0]
        return LogitSite("W_e", True, bias, _feeding(entry, w, last=False), w)
    return None


def padded(entry: Entry) -> dict[str, str]:
    """{token input: length input}: a token input shaped like a ``length``
    input plus that length's ``bound`` holds padded sequences (row n is
    valid up to the length n)."""
    out = {}
    for length in entry.inputs:
        if length.kind != Kind.LENGTH:
            continue
        for spec in entry.inputs:
            if spec.kind == Kind.TOKEN and tuple(spec.shape) == tuple(length.shape) + (length.bound,):
                out[spec.name] = length.name
    return out


def differentiates(entry: Entry) -> bool:
    """Whether the entry computes gradients: a training entry with one output
    per parameter (gradients, SGD steps, training loops; not the losses)."""
    return entry.family == "training" and entry.output_schema is not None


def updates(entry: Entry) -> bool:
    """Whether the entry changes parameters by a learning rate (SGD steps, training loops)."""
    return any(s.kind == Kind.RATE for s in entry.inputs)
