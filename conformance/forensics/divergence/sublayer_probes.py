"""The layer with its sublayers switched on one at a time: which block departs, and why.

``_attention_on`` and ``_mlp_on`` are called by ``in_layer._locate_in_layer`` for each block in
the order the layer runs them (the blocks after it silenced). A component is not blamed for what
another one does in its place: a silenced sublayer must be silent (``_not_silent``), a post-LN sum
is told from its attention (``_post_ln_sum``), a pre-LN norm from what reads it (``_pre_ln_norm``,
``_reads_norm``), an MLP probe is checked against a control that adds the same column through b2
alone (``_mlp_control``).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .ablations import _equal_scores, _other, _output_weights, _zeroed
from .checking import _moves, _Ran, _ran, _within
from .layer_probe import _LayerProbe
from .record import _why_unchecked
from .walk import _LAYERS, Block, _a


def _context_moves(probe: _LayerProbe, params: dict[str, np.ndarray], config: str) -> bool:
    """With ``params`` (the cross-attention silenced: W_o = 0, b_o = 0) the spec's decoder layer does
    not read the encoder's output Z at all: whether the implementation's output moves with Z (then
    the cross-attention is not silenced by its own output weights: it computes with others)."""
    if not any(b.name == "cross-attention" for b in probe.blocks):
        return False
    m = _moves(probe.check, lambda: probe.run_context(params, 1.0, f"{config}, Z × 8"),
               lambda: probe.run_context(params, -1.0, f"{config}, Z × −8"))
    return m is not None and m.only_impl()


def _not_silent(probe: _LayerProbe, blocks: list[Block], params: dict[str, np.ndarray],
                config: str) -> Optional[tuple[str, str]]:
    """The layer departs with ``params``, in which ``blocks`` are silenced (output weights 0). Zero
    output weights silence a sublayer only if it computes with its own: whether one of them is
    heard all the same. The cross-attention: the output moves with the encoder's Z, which nothing
    else reads; any of them: the layer agrees once every weight of that sublayer is 0."""
    how = f"the layer departs with {config}"
    for b in blocks:
        if b.name == "cross-attention" and _context_moves(probe, params, config):
            return b.name, (f"{how}, and its output moves with the encoder's output Z, which only the silenced "
                            "cross-attention reads: the cross-attention computes with other weights than its own")
    for b in blocks:
        if probe.run(_zeroed(params, b), f"{config}, every weight of the {b.name} 0") is True:
            return b.name, (f"{how} but agrees once every weight of the {b.name} is 0: zero output weights do not "
                            f"silence it, so the {b.name} computes with other weights than its own")
    return None


def _post_ln_sum(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray], part: str,
                 said: str) -> Optional[tuple[str, str]]:
    """Post-LN: the layer departs once the attention block ``b`` is on, with equal scores too, while
    mh_attention agrees on its own: its call, or the sum X + f its norm reads. With W_o = 0 the block
    adds b_o 1ᵀ, none of its own computation: if the layer still departs and moves with that b_o
    (as the spec's does), the sum differs: the residual path. If it agrees, the call. Otherwise
    (or at d_e ≤ 2, where a norm keeps little more than a sign) both remain possible."""
    both = ("", f"the layer departs once the {b.name} is on, {part}: its call of the attention or the sum X + f "
                f"its norm reads (the residual path); {said}")
    w_o, b_o = b.attn + "W_o", b.attn + "b_o"
    if probe.d_e < 3 or w_o not in later or b_o not in later:
        probe.candidates = [b.name, "residual"]
        return both
    const = {**later, w_o: np.zeros_like(later[w_o])}
    label = f"the {b.name} made constant (W_o = 0: it adds b_o 1ᵀ)"
    m = _moves(probe.check, lambda: probe.run(const, label),
               lambda: probe.run({**const, b_o: _other(const[b_o])}, label + ", another b_o"))
    if m is not None and m.first is True and m.second is True:
        return None
    if m is not None and m.impl and m.spec:
        return "residual", (f"the layer departs once the {b.name} is on, {part}, and still with the {b.name} made "
                            "constant (W_o = 0: it adds b_o 1ᵀ, none of its own computation), moving with that b_o "
                            "as the spec's does: the sum X + f its norm reads differs (the residual path)")
    probe.candidates = [b.name, "residual"]
    return both


def _reads_norm(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """Pre-LN: the layer departs once block ``b`` is on. Its f reads the norm's output, so the spec's
    output moves with that norm's γ and β; if the implementation's does not, while it does move with
    f's own output weights (f is heard: not a layer left out), f reads something else (the norm's
    result is left unused)."""
    out = _output_weights(later, b)[0]
    if probe.post or b.gamma not in later or out not in later:
        return None
    moved = {**later, b.gamma: _other(later[b.gamma])}
    if b.beta in later:
        moved[b.beta] = _other(later[b.beta])
    ran = _ran(probe.check, probe.run(later, f"sublayers up to the {b.name} on"))
    m = _moves(probe.check, ran, lambda: probe.run(moved, f"the same, the {b.name} block's norm γ and β changed"))
    if m is None or not m.only_spec():
        return None
    heard = _moves(probe.check, ran,
                   lambda: probe.run({**later, out: _other(later[out])}, f"the same, the {b.name}'s {out} changed"))
    if heard is None or not (heard.impl and heard.spec):
        return None
    return "norm", (f"the layer departs once the {b.name} is on, and its output does not move with that block's "
                    f"norm (γ, β) as the spec's does: the {b.name} does not read its norm's output")


def _attention_on(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer with the sublayers up to the attention block ``b`` on: None when it agrees, else
    which of its norm, its mask and the attention departs. Where mh_attention cannot be checked on
    its own, the layer is run again with equal scores (``_equal_scores``) and the detail says what
    that separates, never that the layer's own call differs."""
    if probe.run(later, f"sublayers up to the {b.name} on") is not False:
        return None
    n = probe.norm_ok(b)
    if n is False:
        return "norm", f"the layer departs once the {b.name} is on, and its norm entry departs on its input"
    a = probe.attn_ok(b)
    if probe.mask_ok(b) is False:
        return b.name, f"the layer departs once the {b.name} is on; its unidirectional_mask entry departs"
    if a is False:
        return b.name, f"the layer departs once the {b.name} is on; {probe.attention_entry} departs on its input"
    after = probe.blocks[[c.name for c in probe.blocks].index(b.name) + 1:]
    found = _not_silent(probe, after, later, f"the sublayers up to the {b.name} on, those after it silenced")
    if found is not None:
        return found
    encoder = probe.encoder_places() if b.name == "cross-attention" else []
    why = _why_unchecked(probe.check.record, "mh_attention") if a is None else ""
    said = (f"mh_attention could not be checked on its own ({why})" if why else
            f"{probe.attention_entry} agrees on the spec's input, so the layer's own call of it differs")
    equal = probe.run(_equal_scores(later, b), f"the {b.name} with W_q = 0 (equal scores)")
    if equal is True:
        part = "in its scores (the scale, W_q, W_k or the softmax over varying scores): it agrees with equal scores"
    elif equal is False:
        part = "with equal scores too (its mask, values, heads or output, or what it reads)"
    else:
        part = "(which part could not be checked)"
    if encoder and equal is not True:
        if probe.encoder_cut(later) is False:
            return b.name, (f"the layer departs once the {b.name} is on, {part}, and still with the encoder's "
                            f"output fixed (its last norm's γ = 0); {said}")
        probe.candidates = [b.name] + encoder
        return "", (f"the layer departs once the {b.name} is on, {part}, but not with the encoder's output fixed: "
                    f"the {b.name} (it is the first to read the encoder) or the encoder; {said}")
    if equal is False and not probe.post and b.gamma in later:  # pre-LN: the norm as the layer calls it
        found = _pre_ln_norm(probe, b, later, n, part, said)
        if found is not None:
            return found
    if equal is False and probe.post:
        found = _post_ln_sum(probe, b, later, part, said)
        if found is not None:
            return found
    return b.name, f"the layer departs once the {b.name} is on, {part}; {said}"


def _pre_ln_norm(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray], n: Optional[bool], part: str,
                 said: str) -> Optional[tuple[str, str]]:
    """Pre-LN, the layer departs once attention block ``b`` is on, with equal scores too: the norm as
    the layer calls it, or the attention. With the norm cut (γ = 0) every column the attention reads
    is alike: agreeing there puts the departure in the norm (or, causal, the mask that alike columns
    hide); departing, the layer's output is asked whether it moves with the norm's γ, β at all."""
    cut = {**later, b.gamma: np.zeros_like(later[b.gamma])}
    ran = _ran(probe.check, probe.run(cut, f"the {b.name}'s norm cut (γ = 0): every column it reads alike"))
    if ran[0] is not True:
        return _reads_norm(probe, b, later)
    # agreeing with the norm cut clears the attention only if the attention is still heard there: a
    # norm without β (RMSNorm, affine="scale") gives 0 at γ = 0, so an attention without biases then
    # reads zeros and adds nothing, whatever its code does
    w_o = b.attn + "W_o"
    heard = _moves(probe.check, ran, lambda: probe.run({**cut, w_o: _other(cut[w_o])},
                                                       f"the same, the {b.name}'s W_o changed")) \
        if w_o in cut else None
    if heard is None or not heard.spec:
        found = _reads_norm(probe, b, later)
        if found is not None:
            return found
        probe.candidates = ["norm", b.name]
        return "", (f"the layer departs once the {b.name} is on, {part}; with its norm cut (γ = 0) the {b.name} "
                    "reads only zeros and adds nothing, so that agreement clears neither: its norm as the layer "
                    f"calls it or the {b.name}; {said}")
    detail = (f"the layer departs once the {b.name} is on, {part}, but not when its norm's output is "
              f"fixed: the norm as the layer calls it ({'it agrees' if n else 'it could not be checked'} "
              "on its own)")
    if not probe.causal(b):
        return "norm", detail
    # a causal mask does nothing on columns that are all alike
    alike = probe.run_alike(later, "the layer's input columns all alike (the mask then does nothing)")
    if alike is False:
        return "norm", detail + "; it departs on an input whose columns are all alike, where the mask does nothing"
    if alike is True:  # a norm works column by column: alike columns would show it
        return b.name, (f"the layer departs once the {b.name} is on, {part}, but neither with its norm's output "
                        f"fixed nor on an input whose columns are all alike: its mask (what only distinct columns "
                        f"show); {said}")
    probe.candidates = ["norm", b.name]
    return "", detail + f", or the {b.name}'s mask (alike columns hide it); {said}"


def _mlp_on(probe: _LayerProbe, b: Block, later: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """The layer with the sublayers up to the MLP block ``b`` on, in steps: the MLP made constant,
    its activation alone, b1 varying along its rows, the whole MLP. None when every step agrees."""
    i, _j = b.mlp
    const = {**later, f"W_mlp{i}": np.zeros_like(later[f"W_mlp{i}"])}
    if f"b_mlp{i}" in const:
        const[f"b_mlp{i}"] = np.zeros_like(const[f"b_mlp{i}"])
    ran = _ran(probe.check, probe.run(const, "MLP made constant (W1 = 0, b1 = 0)"))
    if ran[0] is False:
        found = _mlp_control(probe, b, ran, const, 0.0, "with a constant MLP")
        if found is not None:
            return found
        return "MLP", "the layer departs with a constant MLP (its biases or its residual)"
    if f"b_mlp{i}" in later:
        found = _mlp_bias_probes(probe, b, const)
        if found is not None:
            return found
    if probe.run(later, "the whole MLP on") is False:
        if not probe.post and probe.norm_ok(b) is False:
            return "norm", "the layer departs once the MLP is on, and its norm entry departs on its input"
        found = _reads_norm(probe, b, later)
        if found is not None:
            return found
        return "MLP", "the layer departs once the whole MLP is on (its activation agrees on its own)"
    return None


def _mlp_bias_probes(probe: _LayerProbe, b: Block, const: dict[str, np.ndarray]) -> Optional[tuple[str, str]]:
    """With W1 = 0, b1 set to the spec's pre-activations: first a few single values c (b1 = c 1:
    every MLP row, every column sees the same c, so only the activation is exercised, never how b1
    is broadcast), then one column of them (b1 varying along the rows: how b1 is added)."""
    i = b.mlp[0]
    pre = _a(b.pre)  # (d_mlp, ℓ)
    col = int(np.argmax(np.abs(pre).max(axis=0))) if pre.size else 0
    h = pre[:, col].copy()
    values = sorted(set(np.round(h, 12).tolist()), key=abs, reverse=True)[:4]
    for c in values:
        probe_params = {**const, f"b_mlp{i}": np.full_like(h, c)}
        ran = _ran(probe.check, probe.run(probe_params, f"MLP activation probe (W1 = 0, b1 = {c:.3g} everywhere)"))
        if ran[0] is False:
            found = _mlp_control(probe, b, ran, const, np.full_like(h, c), f"when only the MLP's activation is "
                                 f"exercised (at {c:.3g})")
            if found is not None:
                return found
            return "MLP activation", f"the layer departs when only the MLP's activation is exercised (at {c:.3g})"
    probe_params = {**const, f"b_mlp{i}": h}
    ran = _ran(probe.check, probe.run(probe_params, f"MLP bias probe (W1 = 0, b1 = the spec's pre-activations of "
                                                    f"column {col})"))
    if ran[0] is False:
        found = _mlp_control(probe, b, ran, const, h, "when b1 varies along the MLP's rows")
        if found is not None:
            return found
        return "MLP", "the layer departs when b1 varies along the MLP's rows: how b1 is added (its axis)"
    return None


def _mlp_control(probe: _LayerProbe, b: Block, ran: _Ran, const: dict[str, np.ndarray], b1: Any,
                 what: str) -> Optional[tuple[str, str]]:
    """A probe of the MLP block ``b`` departed (``ran``), with W1 = 0 and b1 = ``b1``: the MLP then
    adds the constant column W2 act(b1) + b2. The control adds that same column through b2 alone
    (W2 = 0, b2 ← W2 act(b1) + b2, act the spec's), so none of the MLP's own code runs. If the
    control departs too, or agrees with bounds that accept the probe's own outputs (the two differ
    in their bound, not their values: a marginal departure), the departure is not the MLP's: a norm
    that departs on what it reads there, else the pieces the two share. None when the control agrees
    and the probe's outputs lie outside its bounds (the MLP's own computation departs), or when no
    control can be built (no W2, or a column the control cannot add: gated, or no b2)."""
    w2, b2 = f"W_mlp{b.mlp[1]}", f"b_mlp{b.mlp[1]}"
    if w2 not in const or any(k.startswith("mlp_hidden.") for k in const):
        return None
    from ftspec.spec.functions import apply

    act = probe.variant.resolved_activation(_LAYERS[probe.name])
    W2 = np.asarray(const[w2], dtype=np.float64)
    a = np.asarray(apply(act, [[float(v)] for v in np.broadcast_to(np.asarray(b1, dtype=np.float64),
                                                                       (W2.shape[1],))]), dtype=np.float64)[:, 0]
    # gated, the column is act(b1) ⊙ (W_lin X + b_lin): constant only where act(b1) = 0; without b2
    # the control can add only a zero column
    if (probe.variant.mlp == "gated" or b2 not in const) and np.any(a != 0.0):
        return None
    control = {**const, w2: np.zeros_like(W2)}
    if b2 in const:
        control[b2] = np.asarray(const[b2], dtype=np.float64) + W2 @ a
    second = probe.run(control, "control: the same column added through b2 alone (W2 = 0), none of the MLP's "
                                "code run")
    if second is None or ran[1] is None or ran[1].out is None:
        return None
    if second is True and not _within(probe.check, ran[1].out):
        return None  # the control agrees and the probe's outputs are outside its bounds: the MLP's code
    how = ("departs as well" if second is False else
           "agrees, and the probe's own outputs are within the control's bounds (the two differ in their bound, "
           "not in their values: a margin)")
    first, _ = probe.norms_on(control, "the MLP's column added through b2")
    if first is not None:
        return "norm", (f"the layer departs {what}, but the same column added through b2 alone {how}: not the MLP; "
                        f"the {first.name} block's norm departs on what it reads there")
    if second is False and not np.any(a != 0.0):
        # the MLP made constant adds b2 alone, as the control does: departing both ways with every norm
        # agreeing on what it reads, it is how the MLP adds b2 (its biases), as the probe says
        return None
    k = [c.name for c in probe.blocks].index(b.name)
    probe.candidates = ["norm"] + [c.name for c in probe.blocks[:k] if c.attn] + ["residual"]
    if second is False:  # the control still adds b2: how the MLP adds it remains possible
        probe.candidates.append("MLP")
    return "", (f"the layer departs {what}, but the same column added through b2 alone {how}: not the MLP's "
                "W1 or activation; what it shares with the control (a norm, an earlier sublayer, the residual "
                "path" + (", how b2 is added)" if second is False else ")"))
