"""First divergence names the right component of a whole model (conformance/forensics/divergence/).

One bug is injected per component per model into the bundled NumPy plugin with the zoo's
source-edit machinery (tools/zoo/injection.py: the plugin's own helper is edited, every entry
whose code reaches it inherits the bug). Where each bug sits, and so the place the locator must
name, is written here by hand from the edit: an edit of the layers' residual blocks is a
``layer 0/norm``, an edit of Algorithm 9 line 10 is the ``head``, and so on. The encoder comes
first in the encoder-decoder, so a bug in code the encoder and the decoder share is the
encoder's.

Each bug is located in two plugins: the whole NumPy plugin (every entry offered: the walk checks
each piece through its own entry) and the model or layer entry alone (a public code wrapped as
one entry: the walk has only ablations of that entry). Cases: the default sizes and degenerate
shrunk sizes (d_e = 2, ℓ = 1, H = 1, one layer). A cell counts when the mutant's model fails on
the case; the locator must then name the bug's place (a hit), or leave the place open with the
bug's place among those it says remain possible; naming another place is a wrong answer.

Also the three cases seen on real failures: an unembedding softmax over the wrong axis (not the
final norm), an inverted cross-attention mask (the decoder's cross-attention, not its
self-attention), a GPT block whose attention entries are missing with a scale bug inside (said to
be uncheckable on its own, never "the layer's own mask or call")."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Optional

import pytest


from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member
from ftspec.conformance.forensics.divergence import expected_matches, locate, locate_failure
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER, VariantSet
from ftspec.tools.zoo.injection import Edit, Mutant, build, source_edit

C = "ftspec.impls.numpy.components"
LY = "ftspec.impls.numpy.layers"
A = "ftspec.impls.numpy.architectures"
ALL = tuple(load("numpy").algorithms)

UNBIASED = 'variant.replace(variance="unbiased")'
NO_SCALE = 'variant.replace(attn_scale="none")'

#: bug -> its edits of the NumPy plugin (each a one-line change of the component's own code)
BUGS: dict[str, tuple[Edit, ...]] = {
    "token index slip": (Edit(C, "embed_fwd", "columns(W_e, x)", "columns(W_e, (x + 1) % N_V)"),),
    "positions shifted": (Edit(C, "embed_fwd", "X = X + table[:, :ell]",
                               "X = X + np.roll(table, 1, axis=1)[:, :ell]"),),
    "block norm unbiased": (Edit(LY, "_residual_fwd", "norm_fwd(X + y, params, gamma, beta, variant)",
                                 f"norm_fwd(X + y, params, gamma, beta, {UNBIASED})"),
                            Edit(LY, "_residual_fwd", "norm_fwd(X, params, gamma, beta, variant)",
                                 f"norm_fwd(X, params, gamma, beta, {UNBIASED})")),
    "self-attention unscaled": (Edit(LY, "stack_layer_fwd", "mh_attention_fwd(Y, Y, W, Mask, variant,",
                                     f"mh_attention_fwd(Y, Y, W, Mask, {NO_SCALE},"),),
    "decoder self-attention unscaled": (Edit(LY, "decoder_layer_fwd", "(Y, Y, W_self, self_mask, variant,",
                                             f"(Y, Y, W_self, self_mask, {NO_SCALE},"),),
    "cross-attention mask inverted": (Edit(LY, "decoder_layer_fwd", "(Y, Z, W_cross, cross_mask, variant,",
                                           "(Y, Z, W_cross, np.zeros((Z.shape[-1], Y.shape[-1]), "
                                           "dtype=bool), variant,"),),
    "cross-attention unscaled": (Edit(LY, "decoder_layer_fwd", "mh_attention_fwd(Y, Z, W_cross, cross_mask, variant,",
                                      f"mh_attention_fwd(Y, Z, W_cross, cross_mask, {NO_SCALE},"),),
    "MLP input reversed": (Edit(LY, "mlp_fwd", "H1 = params[w1] @ X", "H1 = params[w1] @ X[..., ::-1, :]"),),
    "encoder token index slip": (Edit(A, "ed_logits_fwd", "embed_tokens_fwd(z, params,",
                                      "embed_tokens_fwd((z + 1) % params['W_e'].shape[1], params,"),),
    "encoder MLP input reversed": (Edit(LY, "stack_layer_fwd", 'mlp_fwd(Y, params, prefix, "1"',
                                        'mlp_fwd(Y[..., ::-1, :], params, prefix, "1"'),),
    "decoder MLP input reversed": (Edit(LY, "decoder_layer_fwd", 'mlp_fwd(Y, params, prefix, "3"',
                                        'mlp_fwd(Y[..., ::-1, :], params, prefix, "3"'),),
    # the paper's activation is GELU (BERT, GPT-2) or ReLU (encoder-decoder): the other one
    "MLP activation swapped": (Edit(LY, "mlp_fwd", "A1 = activation(act_name)(H1)",
                                    'A1 = activation("gelu_tanh" if act_name == "relu" else "relu")(H1)'),),
    "residual normalised": (Edit(LY, "_residual_fwd", "out = X + y", "out = Y + y"),
                            Edit(LY, "_residual_fwd", "norm_fwd(X + y, params", "norm_fwd(y, params")),
    "final norm unbiased": (Edit(A, "_final_norm", "norm_fwd(X, params, gamma, beta, variant)",
                                 f"norm_fwd(X, params, gamma, beta, {UNBIASED})"),),
    "decoder final norm unbiased": (Edit(A, "ed_logits_fwd", '_final_norm(X, params, variant, "ed_decoder"',
                                         f'_final_norm(X, params, {UNBIASED}, "ed_decoder"'),),
    "head ReLU": (Edit(A, "e_logits_fwd", "norm_fwd(activation(act)(pre)", 'norm_fwd(activation("relu")(pre)'),),
    "head input reversed": (Edit(A, "e_logits_fwd", 'params["W_f"] @ X +', 'params["W_f"] @ X[..., ::-1, :] +'),),
    "head norm unbiased": (Edit(A, "e_logits_fwd", '"gamma", "beta", variant)', f'"gamma", "beta", {UNBIASED})'),),
    "unembedding softmax over positions": (
        Edit(C, "softmax_columns", "E = np.exp(S - np.max(S, axis=-2, keepdims=True))",
             "E = np.exp(S - np.max(S, axis=-1, keepdims=True))"),
        Edit(C, "softmax_columns", "return E / np.sum(E, axis=-2, keepdims=True)",
             "return E / np.sum(E, axis=-1, keepdims=True)")),
    "unembedding input reversed": (Edit(A, "unembed_logits_fwd", "logits(X, W_u, b_u)",
                                        "logits(X[..., ::-1, :], W_u, b_u)"),),
    # -- slips between components (see SLIPS below)
    "post-LN residual added twice": (Edit(LY, "_residual_fwd", "norm_fwd(X + y, params, gamma, beta, variant)",
                                          "norm_fwd(X + X + y, params, gamma, beta, variant)"),),
    "MLP second projection is W1 transposed": (Edit(LY, "mlp_fwd", "out = params[w2] @ A1",
                                                    "out = params[w1].T @ A1"),),
    "cross-attention with the self-attention's weights": (
        Edit(LY, "decoder_layer_fwd", "return mh_attention_fwd(Y, Z, W_cross,",
             "return mh_attention_fwd(Y, Z, W_self,"),),
    "cross-attention block's norm reads gamma3, beta3": (
        Edit(LY, "decoder_layer_fwd", '"cross", placement, params, *names(4), variant)',
             '"cross", placement, params, *names(3), variant)'),),
    "MLP block's norm reads gamma1, beta1": (Edit(LY, "stack_layer_fwd", 'prefix + "gamma2", prefix + "beta2"',
                                                  'prefix + "gamma1", prefix + "beta1"'),),
    "pre-LN sublayer reads the unnormalised X": (Edit(LY, "_residual_fwd", "y, f_cache = f(Y)",
                                                      "y, f_cache = f(X)"),),
}

FINAL = PAPER.replace(final_norm="final")

#: model -> (variant set, [(bug, the place it sits)]): the places written from the edits above
MODEL_CELLS: dict[str, tuple[VariantSet, list[tuple[str, str]]]] = {
    "d_transformer": (PAPER, [
        ("token index slip", "embedding"), ("positions shifted", "embedding"),
        ("block norm unbiased", "layer 0/norm"), ("self-attention unscaled", "layer 0/self-attention"),
        ("MLP input reversed", "layer 0/MLP"), ("MLP activation swapped", "layer 0/MLP activation"),
        ("residual normalised", "layer 0/residual"), ("final norm unbiased", "final norm"),
        ("unembedding softmax over positions", "unembedding"), ("unembedding input reversed", "unembedding")]),
    "e_transformer": (FINAL, [
        ("token index slip", "embedding"), ("positions shifted", "embedding"),
        ("block norm unbiased", "layer 0/norm"), ("self-attention unscaled", "layer 0/self-attention"),
        ("MLP input reversed", "layer 0/MLP"), ("MLP activation swapped", "layer 0/MLP activation"),
        ("residual normalised", "layer 0/residual"), ("final norm unbiased", "final norm"),
        ("head ReLU", "head"), ("head input reversed", "head"), ("head norm unbiased", "head"),
        ("unembedding softmax over positions", "unembedding"), ("unembedding input reversed", "unembedding")]),
    # code the encoder and the decoder share puts the bug in both: either stack's place is right
    "ed_transformer": (FINAL, [
        ("token index slip", "embedding"), ("positions shifted", "embedding"),
        ("encoder token index slip", "encoder embedding"),
        ("block norm unbiased", "layer 0/norm"), ("self-attention unscaled", "encoder layer 0/self-attention"),
        ("MLP input reversed", "layer 0/MLP"), ("encoder MLP input reversed", "encoder layer 0/MLP"),
        ("MLP activation swapped", "layer 0/MLP activation"),
        ("residual normalised", "layer 0/residual"), ("final norm unbiased", "final norm"),
        ("decoder self-attention unscaled", "decoder layer 0/self-attention"),
        ("cross-attention mask inverted", "decoder layer 0/cross-attention"),
        ("cross-attention unscaled", "decoder layer 0/cross-attention"),
        ("decoder MLP input reversed", "decoder layer 0/MLP"),
        ("decoder final norm unbiased", "decoder final norm"),
        ("unembedding softmax over positions", "unembedding"), ("unembedding input reversed", "unembedding")]),
}

#: layer entry -> [(bug, the place it sits)]: a layer entry's places are "layer/<sublayer>"
_STACK_LAYER = [("block norm unbiased", "layer/norm"), ("self-attention unscaled", "layer/self-attention"),
                ("MLP input reversed", "layer/MLP"), ("MLP activation swapped", "layer/MLP activation"),
                ("residual normalised", "layer/residual")]
LAYER_CELLS: dict[str, list[tuple[str, str]]] = {
    "gpt2_layer": _STACK_LAYER, "bert_layer": _STACK_LAYER, "encoder_layer": _STACK_LAYER,
    "decoder_layer": [("block norm unbiased", "layer/norm"),
                      ("decoder self-attention unscaled", "layer/self-attention"),
                      ("cross-attention mask inverted", "layer/cross-attention"),
                      ("cross-attention unscaled", "layer/cross-attention"),
                      ("decoder MLP input reversed", "layer/MLP"), ("MLP activation swapped", "layer/MLP activation"),
                      ("residual normalised", "layer/residual")],
}

#: degenerate shrunk sizes: two features, one position, one head, one layer
SMALL = {"d_e": 2, "H": 1, "d_attn": 1, "d_mid": 1, "d_mlp": 2, "ell": 1, "ell_x": 1, "ell_z": 1, "L": 1,
         "L_enc": 1, "L_dec": 1, "ell_max": 2, "N_V": 3, "d_f": 2}


def mutant(bug: str) -> Mutant:
    return Mutant(f"component:{bug}", bug, ALL, source_edit(*BUGS[bug]))


def plugin(bug: str, only: Optional[str] = None) -> Any:
    """The NumPy plugin with ``bug``; ``only``: offer that entry alone (a public code wrapped as one entry)."""
    impl = build(mutant(bug))
    if only is not None:
        impl = dataclasses.replace(impl, algorithms={only: impl.algorithms[only]})
    return impl


def case(algorithm: str, variant: VariantSet = PAPER, seed: int = 0, small: bool = False) -> Case:
    c = Case.build(algorithm, None, variant)
    if small:
        hyper = {k: SMALL.get(k, v) for k, v in c.hyper.items()}
        c = Case.build(algorithm, hyper, variant, seed=seed)
    elif seed:
        c = Case.build(algorithm, c.hyper, variant, seed=seed)
    return c


def located(impl: Any, c: Case) -> Optional[dict[str, Any]]:
    """The locator's record for this case, or None when the implementation agrees with the spec here
    (the whole model is checked first: a bug the case cannot show is no failing cell)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = locate(Member("m", impl, "cpu"), c.algorithm, c.inputs, c.params, c.hyper, c.variant, "float64")
    rec = d.to_dict()
    first = d.checks[0] if d.checks else {}
    if "did not recur" in d.detail or (c.algorithm in LAYER_CELLS and first.get("ok") is True):
        return None
    return rec


def failing(impl: Any, c: Case) -> dict[str, Any]:
    """The locator's record for a case the injected bug must make fail."""
    rec = located(impl, c)
    assert rec is not None, "the injected bug must make this case fail"
    return rec


def outcome(rec: dict[str, Any], where: str) -> str:
    """hit: the place named; open: the place left open among the candidates; wrong: another place named."""
    if expected_matches(where, rec):
        return "hit"
    want, _, sub = where.partition("/")
    for c in rec.get("candidates", []):
        place, _, csub = c.partition("/")
        # a candidate names the bug's place, or the whole of it ("layer 0" for "layer 0/MLP")
        if place.endswith(want) and (not csub or csub == sub):
            return "open"
    return "wrong"


# -- every component of every model and layer --------------------------------------------------------

CELLS = [(m, v, bug, where) for m, (v, cells) in MODEL_CELLS.items() for bug, where in cells] + \
    [(layer, PAPER, bug, where) for layer, cells in LAYER_CELLS.items() for bug, where in cells]
IDS = [f"{m}:{bug}" for m, _v, bug, _w in CELLS]


#: cells the whole plugin leaves open, and why: the encoder's tokens slipped in the model's own call of the
#: embedding (its embedding entry agrees); the cross-attention is the first to read the encoder and
#: agrees with the encoder's output fixed, so the encoder or the cross-attention's reading of it remain
OPEN = {("ed_transformer", "encoder token index slip")}


@pytest.mark.parametrize("algorithm,variant,bug,where", CELLS, ids=IDS)
def test_the_whole_plugin_names_each_component(algorithm, variant, bug, where):
    """Every entry offered, default sizes: the bug's place is named (not merely left open, but for
    the cells of ``OPEN``, which must list it among the candidates)."""
    rec = located(plugin(bug), case(algorithm, variant))
    assert rec is not None, "the injected bug must make this case fail"
    want = "open" if (algorithm, bug) in OPEN else "hit"
    assert outcome(rec, where) == want, (where, rec["where"], rec["sublayer"], rec["candidates"], rec["detail"])


@pytest.mark.parametrize("algorithm,variant,bug,where", CELLS, ids=IDS)
def test_the_entry_alone_never_names_a_wrong_component(algorithm, variant, bug, where):
    """Only the model or layer entry offered (ablations only): the bug's place is named or left open
    among the candidates, never another; every piece it could not check is said."""
    rec = located(plugin(bug, only=algorithm), case(algorithm, variant))
    assert rec is not None
    assert outcome(rec, where) in ("hit", "open"), (where, rec["where"], rec["sublayer"], rec["candidates"])
    assert all("does not implement" in u for u in rec["unchecked"]), rec["unchecked"]


def _rate(only: bool, small: bool, seeds: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(cells failing, hits, left open, wrong) over every model cell."""
    n = hits = open_ = wrong = 0
    for algorithm, variant, bug, where in CELLS:
        if algorithm in LAYER_CELLS:
            continue
        for seed in seeds:
            rec = located(plugin(bug, algorithm if only else None), case(algorithm, variant, seed, small))
            if rec is None:
                continue
            o = outcome(rec, where)
            n, hits, open_, wrong = n + 1, hits + (o == "hit"), open_ + (o == "open"), wrong + (o == "wrong")
    return n, hits, open_, wrong


def test_model_cells_hit_rate_at_least_95_percent():
    """The figure of issue 25: the right component in ≥ 95% of failing model cells (whole plugin,
    default sizes, three seeds), and never a wrong one."""
    n, hits, _open, wrong = _rate(False, False, (0, 1, 2))
    assert n >= 3 * 30 and wrong == 0 and hits >= 0.95 * n, (n, hits, wrong)


@pytest.mark.parametrize("only", [False, True], ids=["whole plugin", "entry alone"])
def test_degenerate_shrunk_cases_leave_the_place_open_rather_than_guess(only):
    """d_e = 2, ℓ = 1, H = 1, one layer: a layer norm over two values keeps only a sign, so some pieces
    cannot be told apart; the locator may leave the place open but never names a wrong one."""
    n, hits, open_, wrong = _rate(only, True, (0, 3))
    assert n > 0 and wrong == 0, (n, hits, open_, wrong)


# -- the three cases seen on real failures ---------------------------------------------------------------

def test_an_unembedding_softmax_over_positions_is_the_unembedding_not_the_final_norm():
    """The softmax of Algorithm 7 over the wrong axis, in a plugin without its unembedding entry (and in
    one with the model alone): the last cut (final norm γ = 0) still departs, the model's output does not
    move with the embeddings before it, so the unembedding, never the final norm."""
    impl = plugin("unembedding softmax over positions")
    for offered in ({k: v for k, v in impl.algorithms.items() if k != "unembedding"}, None):
        p = dataclasses.replace(impl, algorithms=offered) if offered else plugin(
            "unembedding softmax over positions", only="d_transformer")
        rec = failing(p, case("d_transformer"))
        assert (rec["where"], rec["sublayer"]) == ("unembedding", ""), rec["detail"]
        assert any(u.startswith("unembedding (the plugin does not implement unembedding)") for u in rec["unchecked"])


def test_an_inverted_cross_attention_mask_is_the_decoders_cross_attention():
    """Cross-attention given an all-False mask (Mask ≡ 1 inverted): every query without a key, the layer
    raises whatever its weights; with a query that has no key answered by zeros the cross-attention is
    the first block that departs; never its self-attention."""
    for only in (None, "ed_transformer", "decoder_layer"):
        algorithm = only or "ed_transformer"
        rec = failing(plugin("cross-attention mask inverted", only), case(algorithm, FINAL))
        want = "layer/cross-attention" if algorithm == "decoder_layer" else "decoder layer 0/cross-attention"
        assert expected_matches(want, rec), (only, rec["where"], rec["sublayer"], rec["detail"])


def test_a_gpt_block_without_attention_entries_says_what_it_could_not_check():
    """A public GPT block wrapped as gpt2_layer/d_transformer, without any attention entry, with its
    scores not scaled: the self-attention is named from the layer's ablations (it departs once on,
    agrees with equal scores), mh_attention is said to be uncheckable, and no "mask or call" cause is
    made up."""
    impl = plugin("self-attention unscaled")
    offered = {k: v for k, v in impl.algorithms.items() if "attention" not in k}
    p = dataclasses.replace(impl, algorithms=offered)
    for algorithm, want in (("gpt2_layer", "layer/self-attention"), ("d_transformer", "layer 0/self-attention")):
        rec = failing(p, case(algorithm))
        assert expected_matches(want, rec), (algorithm, rec["where"], rec["sublayer"])
        assert "could not be checked" in rec["detail"] and "mask or call" not in rec["detail"], rec["detail"]
        assert "agrees with equal scores" in rec["detail"]
        assert any("does not implement mh_attention" in u for u in rec["unchecked"])


def test_pieces_a_plugin_lacks_are_reported_not_checked_never_a_cause():
    """A plugin with the model but no layer_norm, unembedding or embedding entries: those pieces are listed
    as not checked (with why) and the bug, in the final norm, is still named from the model's ablations."""
    impl = plugin("final norm unbiased")
    lacking = ("layer_norm", "rms_norm", "unembedding", "embedding")
    p = dataclasses.replace(impl, algorithms={k: v for k, v in impl.algorithms.items() if k not in lacking})
    rec = failing(p, case("d_transformer"))
    assert expected_matches("final norm", rec), rec["detail"]
    said = " | ".join(rec["unchecked"])
    for piece in ("embedding (the plugin does not implement embedding)",
                  "final norm (the plugin does not implement layer_norm)",
                  "unembedding (the plugin does not implement unembedding)"):
        assert piece in said, said
    from ftspec.conformance.forensics.divergence import Divergence

    lines = Divergence("d_transformer", "float64", where="final norm", unchecked=rec["unchecked"]).lines()
    assert any(line.startswith("could not check: ") for line in lines) and all(len(x) < 400 for x in lines)


def test_a_correct_plugin_missing_entries_is_located_nowhere():
    """Nothing departs: pieces that could not be checked are listed, none is turned into a cause."""
    impl = load("numpy")
    p = dataclasses.replace(impl, algorithms={"d_transformer": impl.algorithms["d_transformer"]})
    c = case("d_transformer")
    d = locate(Member("m", p, "cpu"), c.algorithm, c.inputs, c.params, c.hyper, c.variant, "float64")
    assert not d.found and not d.candidates and d.unchecked


# -- slips between components: a bug in one place that the probes of another place see first ---------

#: (bug, model or layer entry, the place written from the edit). Post-LN (BERT, the encoder-decoder):
#: norm(2X + f) is the residual sum, not the attention it is first seen with; an MLP whose second
#: projection reads W_mlp1ᵀ is not silenced by W_mlp2 = 0, yet it is the MLP, not the norm after it; a
#: cross-attention that reads the self-attention's weights is first heard when the self-attention is
#: switched on, yet it is the cross-attention; a block norm that reads another block's γ, β is that
#: norm, not the residual path. Pre-LN (GPT-2): a sublayer that reads X instead of norm(X) leaves the
#: norm's result unused: the norm (or the residual path that skips it), not the attention.
SLIPS = [
    ("post-LN residual added twice", "e_transformer", "layer 0/residual"),
    ("post-LN residual added twice", "bert_layer", "layer/residual"),
    ("MLP second projection is W1 transposed", "ed_transformer", "encoder layer 0/MLP"),
    ("MLP second projection is W1 transposed", "encoder_layer", "layer/MLP"),
    ("cross-attention with the self-attention's weights", "ed_transformer", "decoder layer 0/cross-attention"),
    ("cross-attention with the self-attention's weights", "decoder_layer", "layer/cross-attention"),
    ("cross-attention block's norm reads gamma3, beta3", "ed_transformer", "decoder layer 0/norm"),
    ("cross-attention block's norm reads gamma3, beta3", "decoder_layer", "layer/norm"),
    ("MLP block's norm reads gamma1, beta1", "e_transformer", "layer 0/norm"),
    ("MLP block's norm reads gamma1, beta1", "bert_layer", "layer/norm"),
    ("pre-LN sublayer reads the unnormalised X", "d_transformer", "layer 0/norm|layer 0/residual"),
    ("pre-LN sublayer reads the unnormalised X", "gpt2_layer", "layer/norm|layer/residual"),
]
SLIP_IDS = [f"{algorithm}:{bug}" for bug, algorithm, _ in SLIPS]


def located_at(impl: Any, c: Case, dtype: str) -> Optional[dict[str, Any]]:
    """``located`` at ``dtype`` through the runner's hook (the case rounded to the dtype first)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = locate_failure(Member("m", impl, "cpu"), c, dtype, timeout=30.0)
    assert d is not None
    first = d.checks[0] if d.checks else {}
    if "did not recur" in d.detail or (c.algorithm in LAYER_CELLS and first.get("ok") is True):
        return None
    return d.to_dict()


@pytest.mark.parametrize("bug,algorithm,where", SLIPS, ids=SLIP_IDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_slip_between_components_is_named_where_it_sits(bug, algorithm, where, dtype):
    """Whole plugin, the paper's variants, default sizes, three seeds: the place of the bug is named
    (not the component whose probe first hears it)."""
    impl = plugin(bug)
    for seed in (0, 1, 2):
        rec = located_at(impl, case(algorithm, PAPER, seed), dtype)
        assert rec is not None, "the injected bug must make this case fail"
        assert outcome(rec, where) == "hit", (seed, rec["where"], rec["sublayer"], rec["candidates"], rec["detail"])


@pytest.mark.parametrize("bug,algorithm,where", SLIPS, ids=SLIP_IDS)
def test_a_slip_on_small_cases_or_alone_is_never_a_wrong_place(bug, algorithm, where):
    """Small shrunk cases (whole plugin), and the model or layer entry offered alone at default and
    small sizes: the bug's place is named or left open among the candidates, never another. Alone,
    an MLP bug in code both stacks share may be found in the decoder's MLP first."""
    alone = where.replace("encoder layer 0/MLP", "layer 0/MLP")
    runs = [(plugin(bug), True, seed, where) for seed in (0, 1, 2, 3)]
    runs += [(plugin(bug, only=algorithm), small, seed, alone) for small in (False, True) for seed in (0, 3)]
    failing_cells = 0
    for impl, small, seed, want in runs:
        rec = located_at(impl, case(algorithm, PAPER, seed, small), "float64")
        if rec is None:
            continue
        failing_cells += 1
        assert outcome(rec, want) in ("hit", "open"), (small, seed, rec["where"], rec["sublayer"], rec["candidates"])
    assert failing_cells > 0
