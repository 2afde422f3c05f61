"""Locating the sublayer inside a departing layer by ablation (``_locate_in_layer``).

First the layer with every sublayer silenced (``_departs_silenced``: then the departure is on the
path that stays on, a norm or the residual path, or a NaN or an exception that zero weights do not
silence), then the sublayers switched on one at a time (``sublayer_probes``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ftspec.spec.variants import VariantSet

from .ablations import _other, _silenced, _unsilenceable, _zeroed
from .checking import _Checker, _moves, _ran
from .layer_probe import _LayerProbe
from .record import _why_unchecked
from .sublayer_probes import _attention_on, _mlp_on, _not_silent
from .walk import Block, Step, _strip


def _locate_in_layer(check: _Checker, step: Step, variant: VariantSet,
                     probe: Optional["_LayerProbe"] = None) -> tuple[str, str]:
    """(sublayer, how it was found) for a layer whose entry departs on the spec's input: the layer
    with every sublayer silenced, then with the sublayers switched on one at a time. ``probe``: how
    the layer is run (default: its own entry; a model entry with the layer inside it otherwise).
    Places the case cannot tell apart are left in ``probe.candidates`` (the sublayer is then "")."""
    probe = probe or _LayerProbe(check, step, variant)
    blocks = probe.blocks
    silent = dict(step.params)
    for b in blocks:
        silent = _silenced(silent, b)
    if probe.run(silent, "every sublayer silenced (output weights 0)") is False:
        return _departs_silenced(probe, str(check.record[-1].get("note", "")), silent)
    for k, b in enumerate(blocks):
        later = dict(step.params)  # the blocks up to b on, those after it silenced
        for c in blocks[k + 1:]:
            later = _silenced(later, c)
        found = _attention_on(probe, b, later) if b.attn else _mlp_on(probe, b, later)
        if found is not None:
            return found
    return "", "no ablation departs though the layer does (not reproducible piece by piece)"


def _departs_silenced(probe: _LayerProbe, silenced_note: str, silent: dict[str, np.ndarray]) -> tuple[str, str]:
    """The layer departs with every sublayer silenced (``silenced_note``: what that check said). A
    NaN or an exception is not silenced by zero weights: ask the pieces first, then the layer
    without its MLP's biases, then its causal mask, then the layer again with a query that has no key
    answered by zeros (``empty_query='zeros'``, where zero weights silence it); else the residual path
    when the norms were seen to agree (otherwise norm and residual both remain possible)."""
    blocks = probe.blocks
    norms: list[Optional[bool]] = []
    for b in blocks:
        if not probe.post or b is blocks[0]:
            norms.append(probe.norm_ok(b))
            if norms[-1] is False:
                return "norm", f"the layer departs with every sublayer silenced; the {b.name} block's norm departs"
        if b.attn and probe.attn_ok(b) is False:
            return b.name, (f"the layer departs with every sublayer silenced; {probe.attention_entry} departs on "
                            f"the {b.name}'s input")
    nan = "NaN" in silenced_note or "nan" in silenced_note
    if probe.post and not nan:  # silenced, a post-LN layer is a chain of norms: each on what it reads there
        first, verdicts = probe.norms_on(silent, "every sublayer silenced")
        if first is not None:
            return "norm", (f"the layer departs with every sublayer silenced, and the {first.name} block's norm "
                            "departs on what it reads there")
        norms += verdicts
    found = _not_silent(probe, blocks, silent, "every sublayer silenced (output weights 0)")
    if found is not None:
        return found
    structural = silenced_note.startswith("raised") or " has shape " in silenced_note
    # raised, or another shape; at d_e ≤ 2 agreeing through a norm is no proof (it keeps only a sign)
    if structural and probe.variant.mlp_bias and probe.d_e >= 3 and _agrees_without_mlp_biases(probe):
        return "MLP", (f"the layer departs whatever its weights ({silenced_note[:60]}) but agrees "
                       "without the MLP's biases: how b1, b2 are added")
    for b in blocks:
        if b.attn and probe.mask_ok(b) is False:
            return b.name, "the layer departs with every sublayer silenced, and its unidirectional_mask entry departs"
    if (nan or structural) and probe.variant.empty_query != "zeros":
        zeros = probe.under(probe.variant.replace(empty_query="zeros"))
        if zeros.run(silent, "every sublayer silenced, empty_query='zeros'") is True:
            found = _locate_in_layer(zeros.check, zeros.step, zeros.variant, zeros)
            probe.candidates = zeros.candidates
            if found[0] or zeros.candidates:
                return found[0], ("a NaN or an exception that zero weights do not silence; with a query that "
                                  f"has no key answered by zeros (empty_query='zeros'): {found[1]}")
    if nan and not structural:
        found = _nan_source(probe, silent)
        if found is not None:
            return found
    if probe.post and _still_normalised(probe, silent):
        return "norm", ("the layer departs with every sublayer silenced, yet with γ = 1, β = 0 each column it returns "
                        "has mean 0 and one spread, not the spec's: its norms run, with another convention than the "
                        "spec's (variance, ε: the norm as the layer calls it)")
    if probe.post and not (nan or structural):
        found = _post_ln_norm_params(probe, silent)
        if found is not None:
            return found
    # a NaN is made by a division, never by the residual sums: agreeing norms do not make it the residual's
    if norms and all(n is True for n in norms) and not (probe.post and probe.d_e < 3) and not nan:
        return "residual", ("the layer departs with every sublayer silenced while its norm and attention entries "
                            "agree: the residual path (or where the norms sit) differs")
    why = _why_unchecked(probe.check.record, probe.norm_entry)
    probe.candidates = ["norm", "residual"]
    if nan or structural:  # an exception or a NaN zero weights leave: any attention's mask may give it
        probe.candidates += [b.name for b in blocks if b.attn]
    return "", ("the layer departs with every sublayer silenced: its norm or its residual path (the norm could not "
                f"be checked on its own: {why or 'no norm is exercised on its own here'})")


def _nan_source(probe: _LayerProbe, silent: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer returns NaN with every sublayer silenced, where the spec's values are finite. Zero
    output weights cannot silence a NaN (0 · NaN = NaN), so the layer is run with every weight of
    every sublayer 0: each sublayer then computes on zeros, and the residual sums and the MLP
    (W₂ act(0) + b₂ with everything 0) make no NaN out of finite numbers. What can is a division: a
    norm's, by its spread, or an attention's softmax over a query its mask leaves without a key.
    A norm is cleared by its entry agreeing on what it reads; a self-attention by an entry that builds
    its own mask (``causal_self_attention``, ``self_attention``) agreeing on its input; the
    residual path is never the source. One place left is named; several are left open. None when the
    NaN goes once every weight is 0 (then it is not weight-free: the other probes decide)."""
    zero = dict(silent)
    for b in probe.blocks:
        zero = _zeroed(zero, b)
    if probe.run(zero, "every weight of every sublayer 0") is not False or \
            not _unsilenceable(str(probe.check.record[-1].get("note", ""))):
        return None
    suspects: list[str] = []
    cleared: list[str] = []
    for b in probe.blocks:
        if not b.attn:
            continue
        own = [c for c in probe.attention_calls(b) if c[0] != "mh_attention"]
        oks = [probe.check(probe.step.where, name, inputs, _strip(probe.step.params, b.attn), hyper,
                           f"the {b.name}, with the mask {name} builds itself", values=True)
               for name, inputs, hyper in own]
        if oks and all(ok is True for ok in oks):
            cleared.append(f"the {b.name} through {', '.join(c[0] for c in own)}")
        else:
            suspects.append(b.name)
    norms = [probe.norm_ok(b) for b in probe.blocks if b.gamma in probe.step.params]
    if norms and all(n is True for n in norms):
        cleared.append(f"the norms through {probe.norm_entry}")
    elif norms:
        suspects.append("norm")
    how = ("the layer returns NaN whatever its weights (every weight of every sublayer 0), where the spec's values "
           "are finite: a division by zero, in a norm or in an attention's softmax over a query with no key (the "
           "residual sums make no NaN)" + (f"; cleared on their own: {'; '.join(cleared)}" if cleared else ""))
    if not suspects:
        return None
    if len(suspects) == 1:
        where = "its mask leaves a query without a key" if suspects[0] != "norm" else "its norm as the layer calls it"
        return suspects[0], f"{how}: the {suspects[0]} ({where})"
    probe.candidates = suspects
    return "", how


def _post_ln_norm_params(probe: _LayerProbe, silent: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """Post-LN with every sublayer silenced the layer is a chain of norms, and the spec's output moves
    with each norm's γ (and β). A norm whose own γ, β the implementation's output does not move with,
    while it moves with another block's norm: that norm computes with the other norm's parameters.
    (An output that moves with no norm's parameters is a residual path that bypasses the norms: not
    this.) None when no norm shows it."""
    ran = _ran(probe.check, probe.run(silent, "every sublayer silenced (again)"))
    if ran[0] is None:
        return None

    def changed(b: Block) -> dict[str, np.ndarray]:
        return {**silent, **{k: _other(silent[k]) for k in (b.gamma, b.beta) if k in silent}}

    for b in probe.blocks:
        if b.gamma not in silent:
            continue
        own = _moves(probe.check, ran, lambda: probe.run(changed(b), f"every sublayer silenced, the {b.name} "
                                                                     "block's norm γ, β changed"))
        if own is None or not own.only_spec():
            continue
        for c in probe.blocks:
            if c is b or c.gamma not in silent:
                continue
            other = _moves(probe.check, ran, lambda: probe.run(changed(c), f"every sublayer silenced, the {c.name} "
                                                                           "block's norm γ, β changed"))
            if other is not None and other.impl:
                return "norm", (f"the layer departs with every sublayer silenced, and its output does not move with "
                                f"the {b.name} block's norm γ, β as the spec's does, yet moves with the {c.name} "
                                "block's: that norm computes with other parameters than its own")
    return None


def _still_normalised(probe: _LayerProbe, silent: dict[str, np.ndarray]) -> bool:
    """Post-LN with every sublayer silenced the spec returns norm(X): with γ = 1, β = 0 (layer norm) each
    column has mean 0 and the same spread. Whether the implementation's columns still do (then its norm
    runs, differently) rather than the residual path being changed.

    Judged by the call's derived bounds B (``tolerances.reference``), never by a picked tolerance: an
    output within B of values whose column mean is 0 has a column mean within the mean of B, and a
    column spread (root mean square) within the root mean square of B of theirs (the triangle
    inequality). So the columns are normalised as the spec normalises when every spread is within
    that of the spec's; still normalised, differently, when every column mean is within the mean of
    B and the spreads vary across columns no more than the spec's own do (its ε) plus that rounding.
    The bounds are the spec's rounding at the dtype, the implementation's own stands in for its
    rounding as the search's judgement takes it to."""
    if probe.variant.norm != "layer_norm" or probe.d_e < 3:
        return False
    plain = dict(silent)
    for b in probe.blocks:
        for name, value in ((b.gamma, 1.0), (b.beta, 0.0)):
            if name in plain:
                plain[name] = np.full_like(plain[name], value)
    call = probe.check.last if probe.run(plain, "every sublayer silenced, γ = 1, β = 0") is False else None
    if call is None or not call.out:
        return False
    name, got = next(iter(call.out.items()))
    Y = np.asarray(got, dtype=np.float64)
    if Y.ndim != 2 or not np.all(np.isfinite(Y)) or name not in call.ref.outputs:
        return False
    Z = np.asarray(call.ref.outputs[name], dtype=np.float64)
    B = np.asarray(call.ref.bound[name], dtype=np.float64)
    if Z.shape != Y.shape or B.shape != Y.shape or not np.all(np.isfinite(Z)):
        return False
    spread, want, rounding = (np.sqrt(np.mean(A * A, axis=0)) for A in (Y, Z, B))
    if np.all(np.abs(spread - want) <= rounding):  # normalised as the spec normalises: what it reads differs
        return False
    centred = np.all(np.abs(Y.mean(axis=0)) <= B.mean(axis=0))
    alike = np.all(np.abs(spread - spread[0]) <= np.abs(want - want[0]) + rounding + rounding[0])
    return bool(centred and alike and spread[0] > 0)


def _agrees_without_mlp_biases(probe: _LayerProbe) -> bool:
    """Zero weights cannot silence a crash: whether the layer agrees without its MLP's biases
    (``mlp_bias=False``)."""
    step = probe.step
    lean = {k: v for k, v in step.params.items()
            if not (k.startswith("b_mlp") or (k.startswith("mlp_hidden.") and k.endswith(".b")))}
    return probe.check(step.where, probe.name, step.inputs, lean, step.hyper, "the layer with mlp_bias=False",
                       probe.variant.replace(mlp_bias=False)) is True
