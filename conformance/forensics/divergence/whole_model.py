"""The whole model under ablations, when every entry agrees on its own or could not be checked.

``_walk_whole``: cut to its fewest departing layers; every sublayer silenced (what stays on:
embedding, post-LN norms, final norm, head, unembedding, residual path: ``_chain``); then each
layer's sublayers switched on in order, as inside a layer (``in_layer._locate_in_layer``, run
through the model).
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import VariantSet

from .ablations import _other, _silence_layer, _unsilenceable, _zeroed
from .checking import _Checker, _moves, _ran
from .in_layer import _locate_in_layer
from .model_probe import (_blind, _cut, _cuts, _fewest_layers, _ModelLayerProbe, _ModelProbe, _places, _uncuttable,
                          _upstream_changed)
from .record import Divergence
from .walk import _LAYERS, _blocks, _strip, model_walk


def _walk_whole(d: Divergence, check: _Checker, model: str, model_entry: str, x: Mapping[str, np.ndarray],
                params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: VariantSet) -> None:
    """Every entry agreed on its own, or could not be checked: find the departure with the model entry
    itself. Cut to its fewest departing layers; every sublayer silenced (what stays on: embedding,
    post-LN norms, final norm, head, unembedding, residual path: ``_chain``); then each layer's
    sublayers switched on in order, as inside a layer (``_locate_in_layer``, run through the model)."""
    mp = _ModelProbe(check, model, model_entry, x, params, hyper, variant)
    if mp.run(params, "the whole model") is not False:
        d.detail = "the whole model agrees with the spec on this case (the failure did not recur here)"
        return
    note = str(d.checks[-1].get("note", ""))
    prefix = ""
    if _unsilenceable(note):  # zero weights silence neither an exception nor a NaN
        zv = variant.replace(empty_query="zeros")
        ok: Optional[bool] = None
        if variant.empty_query != "zeros":
            h = {k: hyper[k] for k in REGISTRY[model_entry].hyper}
            ok = check.under(zv)("model", model_entry, x, dict(params), h, "the whole model, empty_query='zeros'")
        if ok is not False or _unsilenceable(str(d.checks[-1].get("note", ""))):
            if _blind(variant, hyper):
                d.candidates = _places(mp)
                d.detail = (f"the model entry {note[:80]}; with empty_query='zeros' it agrees, and at d_e = "
                            f"{hyper['d_e']} a norm hides too much to tell where")
                return
            if "NaN" in note:
                _fewest_layers(mp)  # the fewer layers kept, the fewer places left open
                if _model_nan(d, mp):
                    return
            d.where = "model entry"
            d.detail = f"every entry agrees on its own or could not be checked; the model entry itself {note[:80]}"
            return
        mp = _ModelProbe(check.under(zv), model, model_entry, x, params, hyper, zv)
        variant = zv
        prefix = "with a query that has no key answered by zeros (empty_query='zeros'), "
    if _t5_tables(d, mp, variant, prefix):
        return
    _whole_walk(d, mp, variant, prefix)
    if _blind(variant, mp.hyper) and d.where != "unembedding":
        named = f"{d.where}/{d.sublayer}" if d.sublayer else d.where
        # the layer as a whole stays listed: its other sublayers remain as possible as any other place
        others = [p for p in _places(mp) if p != named]
        d.candidates = ([named] if named else []) + [c for c in d.candidates if c != named] + others
        d.where, d.sublayer = "", ""
        d.detail += (f"; but at d_e = {mp.hyper['d_e']} a {variant.norm} keeps little more than a sign, so what "
                     "agrees through a norm is no proof: every place remains possible, the probes pointed first "
                     "at the first one listed")


#: T5's two relative-bias tables in the encoder-decoder (rel_bias="t5_buckets"): each stack's, held by its first layer
_T5_TABLES = ("enc_layers.0.attn.rel_bias", "dec_layers.0.self_attn.rel_bias")


def _t5_tables(d: Divergence, mp: _ModelProbe, variant: VariantSet, prefix: str) -> bool:
    """T5's encoder-decoder (issue 38): every layer agreed on its own, the model departs. With both stacks'
    tables 0 the spec adds no bias anywhere, nor does any reading of the tables: if the model then agrees, the
    departure is in how the tables are read (which layer reads which table, and with which buckets), not in the
    layers' own computation; with the decoder's table set to the encoder's, a model whose decoder reads the
    encoder's table agrees. False (the walk goes on) where neither holds or the model is not T5's. The probes go
    through no norm, so they hold at any d_e."""
    if variant.rel_bias != "t5_buckets" or not all(t in mp.params for t in _T5_TABLES):
        return False
    zero = {**mp.params, **{t: np.zeros_like(mp.params[t]) for t in _T5_TABLES}}
    if mp.run(zero, "both stacks' relative-bias tables 0") is not True:
        return False
    d.where, d.sublayer = "relative-bias tables", ""
    said = (prefix + "the model agrees once both stacks' relative-bias tables are 0 (rel_bias='t5_buckets') and "
            "departs as given; ")
    if mp.run({**mp.params, _T5_TABLES[1]: mp.params[_T5_TABLES[0]]},
              "the decoder's relative-bias table set to the encoder's") is True:
        d.detail = said + ("it agrees with the decoder's table set to the encoder's: its decoder self-attention "
                           "reads the encoder's table (enc_layers.0.attn.rel_bias), where T5 gives each stack its "
                           "own (dec_layers.0.self_attn.rel_bias: transformers 5.24 T5Stack, one per stack)")
    else:
        d.detail = said + ("it reads the tables otherwise than T5, where each stack's one table, held by its first "
                           "layer, biases every layer's self-attention of that stack (bidirectional buckets in the "
                           "encoder, causal in the decoder) and no cross-attention (transformers 5.24 T5Stack: the "
                           "first block's position_bias handed to every block): a later layer reading a table of "
                           "its own or none, the bias in a cross-attention, or other buckets")
    return True


def _model_nan(d: Divergence, mp: _ModelProbe) -> bool:
    """The model returns NaN where the spec's values are finite, and zero output weights cannot silence
    a NaN: with every weight of every sublayer 0, a NaN that stays is made by a division (a norm's, or
    an attention's softmax over a query its mask leaves without a key), never by the residual sums or
    the model's wiring: every attention and norm of the model remains (the walk has no entry to tell
    them apart). False when the NaN goes with the weights."""
    zero = dict(mp.params)
    for at, layer, _where in mp.layers():
        p = _strip(zero, at)
        for b in _blocks(layer):
            p = _zeroed(p, b)
        zero.update({at + k: v for k, v in p.items()})
    if mp.run(zero, "every weight of every sublayer 0") is not False or \
            not _unsilenceable(str(mp.check.record[-1].get("note", ""))):
        return False
    order = sorted(mp.layers(), key=lambda o: (o[0].startswith("dec_"), int(o[0].split(".")[1])))
    d.candidates = [f"{where}/{name}" for _at, layer, where in order
                    for name in [b.name for b in _blocks(layer) if b.attn] + ["norm"]]
    d.detail = ("the model entry returns NaN where the spec's values are finite, and still with every weight of every "
                "sublayer 0 (cut to its fewest departing layers): a division by zero (an attention's softmax over a "
                "query with no key, or a norm), which no entry offered can place")
    return True


def _whole_walk(d: Divergence, mp: _ModelProbe, variant: VariantSet, prefix: str) -> None:
    new = _fewest_layers(mp)
    base = dict(mp.params)
    for at, layer, _where in mp.layers():
        base = _silence_layer(base, at, layer)
    if new is not None:
        at, layer, where = new
        config = {**mp.params, **{k: v for k, v in base.items() if k.startswith(at)}}
        if mp.run(config, f"{where}'s sublayers silenced, the layers before it on") is False:
            d.where = where
            d.detail = (prefix + f"the model departs once it has {where} and agrees without it, even with that "
                        "layer's sublayers silenced: the model runs the layer differently (its parameters, its "
                        "residual path)")
            return
        if _in_layer(d, mp, variant, new, mp.params, prefix):
            return
    if mp.run(base, "every layer's sublayers silenced") is False:
        if not _model_not_silent(d, mp, base, prefix):
            _chain(d, mp, variant, base, prefix)
        return
    order = mp.layers()
    for k, (at, layer, where) in enumerate(order):
        config = dict(mp.params)  # the layers before this one on, those after it silenced
        for at2, layer2, _ in order[k + 1:]:
            config = _silence_layer(config, at2, layer2)
        if _in_layer(d, mp, variant, (at, layer, where), config, prefix):
            return
    d.detail = prefix + "the model departs, but no layer's sublayers switched on one at a time show where"


def _model_not_silent(d: Divergence, mp: _ModelProbe, base: dict[str, np.ndarray], prefix: str) -> bool:
    """The model departs with every sublayer silenced (output weights 0). Zero output weights silence a
    sublayer only if it computes with its own: whether the model agrees once every weight of one
    sublayer is 0 (then that sublayer is heard though silenced: it computes with other weights)."""
    for at, layer, where in mp.layers():
        for b in _blocks(layer):
            zeroed = _zeroed(_strip(base, at), b)
            if mp.run({**base, **{at + k: v for k, v in zeroed.items()}},
                      f"every sublayer silenced, every weight of {where}'s {b.name} 0") is True:
                d.where, d.sublayer = where, b.name
                d.detail = prefix + (f"the model departs with every sublayer silenced (output weights 0) but agrees "
                                     f"once every weight of {where}'s {b.name} is 0: zero output weights do not "
                                     f"silence it, so it computes with other weights than its own")
                return True
    return False


def _in_layer(d: Divergence, mp: _ModelProbe, variant: VariantSet, layer: tuple[str, str, str],
              config: dict[str, np.ndarray], prefix: str) -> bool:
    """The layer switched on inside the model (``config``: the other layers as they stand): whether
    it departs, and then where (``_locate_in_layer`` with the model entry running the layer)."""
    at, name, where = layer
    if mp.run(config, f"{where} on, the layers after it silenced") is not False:
        return False
    steps, _ = model_walk(mp.model, mp.x, config, mp.hyper, variant)
    step = next(s for s in steps if s.where == where)
    probe = _ModelLayerProbe(mp, step, variant, at, config)
    sub, detail = _locate_in_layer(probe.check, step, variant, probe)
    d.where, d.sublayer = where, sub
    d.candidates = [c if c.startswith("encoder ") else f"{where}/{c}" for c in probe.candidates]
    d.detail = prefix + f"the model departs once {where} is on; {detail}"
    return True


def _chain(d: Divergence, mp: _ModelProbe, variant: VariantSet, base: dict[str, np.ndarray], prefix: str) -> None:
    """The model departs with every sublayer silenced: the departure is on the path that stays on.
    Each norm on it is cut in turn from the last (γ = 0, β fixed); the latest cut that still departs
    bounds the departure to what follows it, unless the model's output still depends on what precedes
    the cut (then the cut norm itself is not applied as the spec applies it). With no cut departing,
    the departure precedes the first norm: the residual path (pre-LN), or the embedding (tokens only,
    positions only, every column the same token)."""
    cuts = _cuts(mp, variant, base)
    after = [(c.where, c.sublayer) for c in cuts[1:]] + [("unembedding", "")]
    for k in range(len(cuts) - 1, -1, -1):
        c = cuts[k]
        cut = _cut(base, c)
        label = f"{c.where} {c.sublayer}".strip()
        r = mp.run(cut, f"sublayers silenced, {label} cut (γ = 0)")
        if r is None:
            d.detail = prefix + f"the model departs with every sublayer silenced; could not check it with {label} cut"
            return
        if r is False and _unsilenceable(str(mp.check.record[-1].get("note", ""))):
            continue  # a NaN passes through γ = 0: it comes from before the cut
        if r is False:
            first = mp.check.last
            moved = _upstream_changed(cut, variant)
            if moved is not None and mp.run(moved, "the same, other embeddings before the cut") is not None \
                    and first is not None and first.impl_moved(mp.check.last):
                d.where, d.sublayer = c.where, c.sublayer
                d.detail = prefix + (f"with its γ = 0, {label} still passes on what reaches it: the model does "
                                     "not apply it as the spec does")
                return
            where, sub = after[k]
            _after_cut(d, mp, where, sub, label, prefix)
            return
    uncut = _uncuttable(mp, variant, base)
    if uncut:  # a norm without γ on the path: what precedes it and what follows cannot be told apart
        emb = "decoder embedding" if mp.model == "ed" else "embedding"
        d.candidates = [emb, *uncut, "unembedding"]
        d.detail = prefix + ("the model departs with every sublayer silenced and no norm that can be cut "
                             f"departs; the norms of {', '.join(uncut)} have no γ to cut (affine=none), so "
                             "the case cannot tell where on the path")
        return
    first_where = cuts[0].where if cuts else "unembedding"
    first_sub = cuts[0].sublayer if cuts else ""
    if _pre_ln_residual(d, mp, variant, base, prefix):
        return
    _embedding_or(d, mp, variant, base, (first_where, first_sub), prefix)


def _after_cut(d: Divergence, mp: _ModelProbe, where: str, sub: str, label: str, prefix: str) -> None:
    how = f"the model departs with every sublayer silenced and {label} cut (its output fixed), and only there"
    if where == "head":
        d.where, d.sublayer = "head", ""
        d.detail = prefix + how + ": the head (W_f, its activation or its norm, Algorithm 9 lines 10-11)"
    elif sub == "norm" and where != "head":  # two post-LN norms with a silenced sublayer between them
        d.where, d.sublayer = where, ""
        d.candidates = [f"{where}/norm", f"{where}/residual"]
        d.detail = prefix + how + f": {where}'s norm or its residual path (a silenced sublayer between them)"
    else:
        d.where, d.sublayer = where, sub
        d.detail = prefix + how + f": {where}"


def _pre_ln_residual(d: Divergence, mp: _ModelProbe, variant: VariantSet, base: dict[str, np.ndarray],
                     prefix: str) -> bool:
    """Pre-LN, with its sublayer silenced a layer is the identity whatever its norms' γ and β: if the
    model's output moves with them, that layer's residual path differs."""
    order = [o for o in mp.layers() if variant.resolved_norm_placement(_LAYERS[o[1]]) == "pre"
             and (mp.model != "ed" or o[0].startswith("dec_"))]
    order.sort(key=lambda o: (o[0].startswith("dec_"), int(o[0].split(".")[1])))
    if not order or mp.run(base, "every sublayer silenced (again)") is None:
        return False
    ref = mp.check.last
    for at, layer, where in order:
        moved = dict(base)
        for b in _blocks(layer):
            for name in (at + b.gamma, at + b.beta):
                if name in moved:
                    moved[name] = -2.0 * np.asarray(moved[name], dtype=np.float64) + 0.75
        if mp.run(moved, f"{where}'s norms changed, its sublayers silenced") is None:
            continue
        if ref is not None and ref.impl_moved(mp.check.last):
            d.where, d.sublayer = where, "residual"
            d.detail = prefix + (f"with its sublayers silenced {where} is the identity in the spec (pre-LN), yet the "
                                 "model's output moves with its norms' γ and β: the residual path adds what the "
                                 "norm returns")
            return True
    return False


def _moves_with_tokens(mp: _ModelProbe, params: dict[str, np.ndarray]) -> bool:
    """Whether the implementation's output, with ``params``, moves with the (decoder's) tokens as the
    spec's does: what the tokens pick reaches the output (a model whose path after the embedding
    ignores what reaches it does not)."""
    x = dict(mp.x)
    n_v = int(mp.hyper["N_V"])
    if n_v < 2 or "x" not in x:
        return False
    other = _ModelProbe(mp.check, mp.model, mp.entry, {**x, "x": (np.asarray(x["x"]) + 1) % n_v}, params,
                        mp.hyper, mp.variant)
    m = _moves(mp.check, lambda: mp.run(params, "the same, the case's tokens"),
               lambda: other.run(params, "the same, every token shifted by one"))
    return m is not None and m.impl and m.spec


def _embedding_or(d: Divergence, mp: _ModelProbe, variant: VariantSet, base: dict[str, np.ndarray],
                  first: tuple[str, str], prefix: str) -> None:
    """Before the first norm on the path: the embedding, or that first norm (or, with none, the
    unembedding). Tokens only (W_p = 0) against positions only (W_e = 0): a departure in one of them
    only is the embedding's. An output that does not move with W_e as the spec's does, yet moves with
    the tokens, is the embedding's (it embeds its tokens from another matrix). Then every token
    embedded as the same column (the embedding barely exercised): a departure there is the first
    norm's."""
    emb = "decoder embedding" if mp.model == "ed" else "embedding"
    how = prefix + "the model departs with every sublayer silenced and with each norm on the path cut, so before it"
    if "W_p" in base:
        tok = mp.run({**base, "W_p": np.zeros_like(base["W_p"])}, "sublayers silenced, tokens only (W_p = 0)")
        pos = mp.run({**base, "W_e": np.zeros_like(base["W_e"])}, "sublayers silenced, positions only (W_e = 0)")
        if {tok, pos} == {True, False}:
            d.where = emb
            d.detail = how + f": it departs with {'tokens' if tok is False else 'positions'} only, not with " \
                             f"{'positions' if tok is False else 'tokens'} only: the embedding's " \
                             f"{'tokens' if tok is False else 'positions'}"
            return
    # the embedding must read W_e: with every sublayer silenced and the cuts agreeing, a model whose
    # output does not move with the token embeddings while the spec's does embeds its tokens from
    # something else (another matrix, e.g. a W_u tied to the embedding the other way round)
    if "W_e" in base:
        ran = _ran(mp.check, mp.run(base, "every sublayer silenced (again)"))
        m = _moves(mp.check, ran, lambda: mp.run({**base, "W_e": _other(base["W_e"])},
                                                 "sublayers silenced, other token embeddings W_e"))
        if m is not None and m.only_spec() and _moves_with_tokens(mp, base):
            d.where = emb
            d.detail = how + (": its output does not move with the token embeddings W_e as the spec's does, yet "
                              "moves with the tokens: the embedding does not read W_e (it embeds its tokens from "
                              "something else)")
            return
    same = None
    if not variant.positions.startswith("sinusoid"):
        W = np.asarray(base["W_e"], dtype=np.float64)
        col = np.linspace(-1.0, 1.5, W.shape[0]) if W.shape[0] > 1 else np.ones(1)
        p = {**base, "W_e": np.repeat(col[:, None], W.shape[1], axis=1)}
        if "W_p" in p:
            p["W_p"] = np.zeros_like(p["W_p"])
        same = mp.run(p, "sublayers silenced, every token the same column, no positions")
    first_place = f"{first[0]}/{first[1]}" if first[1] else first[0]
    if same is False and first[1] == "norm" and first[0] != "head":  # post-LN: X + 0 reaches that norm
        d.where, d.candidates = first[0], [first_place, f"{first[0]}/residual"]
        d.detail = how + f": it departs when every token is embedded alike: {first[0]}'s norm or its residual path"
    elif same is False:
        d.where, d.sublayer = first
        d.detail = how + f": it departs when every token is embedded alike (the embedding barely exercised): " \
                         f"{first_place}"
    elif same is True and not variant.embedding_norm:
        d.where = emb
        d.detail = how + ": it agrees when every token is embedded alike: the embedding"
    else:
        d.candidates = [emb, first_place]
        d.detail = how + ": the case cannot tell the embedding from what first follows it"
