"""First divergence inside a model: where an implementation first departs from the spec.

A whole-model failure (``ed/e/d_transformer``, their losses, gradients and
SGD steps) or a layer failure says *that* the output is wrong, not *where*.
On the shrunk case this package walks the model's computation in order and
checks each piece on its own, with what the implementation already offers:

1. the spec's intermediate values, recorded by the spec's own model (or layer)
   entry as it runs (``spec/intermediates.py``: ``embedding``, ``layers.{l}``,
   each block's norm, sublayer and residual sum, ...), so no step is computed
   twice; tests/conformance/forensics/test_divergence.py checks that each step's entry,
   fed the recorded value at its input, gives the next step's input exactly;
2. each piece checked through the implementation's own entry for it, fed
   the spec's value at its input: ``embedding``, each layer (``gpt2_layer``,
   ``bert_layer``, ``encoder_layer``, ``decoder_layer``), the final and head
   norms (``layer_norm`` / ``rms_norm``), ``unembedding``; judged exactly as
   the search judges (``tolerances.reference`` at the cell's dtype, then
   ``judge.judge``);
3. inside the first layer that departs, ablations of that layer entry's
   parameters locate the sublayer: every sublayer silenced (its output
   weights zero: what is left is the residual path and, post-LN, the norms),
   then the sublayers switched on one at a time in the order the layer runs
   them; the MLP in three steps (a constant MLP, W₁ = 0 with b₁ set to a
   column of the spec's pre-activations: only the activation is exercised,
   then the whole MLP). The first configuration that departs names the
   sublayer; the ``layer_norm`` and ``mh_attention`` entries, fed the spec's
   values inside the layer, then separate a norm from its attention. A
   component is not blamed for what another one does in its place, so the
   walk asks where the evidence points before naming the block it was
   looking at: a silenced sublayer must be silent (the layer agrees once
   all its weights are 0; a silenced cross-attention does not move the
   output with the encoder's Z), else it is that sublayer; a post-LN block
   whose attention, made constant (W_o = 0), still departs and moves with
   b_o is its residual sum; a post-LN norm whose γ, β do not move the
   silenced layer's output, while another block's norm's do, reads that
   norm's parameters; a pre-LN block whose output does not move with its norm's
   γ, β, though it moves with its own output weights, does not read its
   norm (the norm). Every attention entry the plugin offers checks an attention block
   (``mh_attention``; for a self-attention also ``causal_self_attention`` or ``self_attention``,
   which build their own mask, and their padded forms), and ``token_embedding`` /
   ``positional_embedding`` stand in for a missing ``embedding``. A probe that departs is a
   norm's when that norm's entry departs on what it reads in that probe (the spec's values under
   the probe's parameters); an MLP probe (W₁ = 0) is checked against a control that adds the same
   column through b₂ alone: departing too, or agreeing with bounds that accept the probe's own
   outputs (a margin), it is not the MLP's. A cut norm clears its attention only if the attention
   is still heard (an RMSNorm has no β: at γ = 0 its attention reads zeros). Zero weights cannot
   silence a NaN (0 · NaN = NaN): with every weight of every sublayer 0 a NaN that stays is a
   division's (a norm, or a softmax over a query with no key), never the residual sums; norms and
   self-attentions whose entries agree are cleared, and what is left is named or left open. Where
   the probes cannot separate two places (a norm over d_e ≤ 2 features keeps little more than a
   sign) both are listed;
4. when every entry agrees, the model itself with its layers silenced (is the
   departure outside the layers: the ETransformer head, the wiring?) and
   with its first layers only (which layer does the model run differently
   from its layer entry, e.g. with another layer's parameters).

An implementation may also offer named intermediates of its own
(``Implementation.intermediates``, docs/plugins.md "Named intermediates"):
then each named value is compared with the spec's under the bound the
harness gives an output (``core/intermediates.py``, as ``ftspec spec
intermediates`` shows them), in the order of the computation, and the first
one that departs is reported as well: the coarse
names (``layers.1``) and the fine ones inside them (``layers.1.attn.heads.0.A``,
``layers.1.norm2.sigma``), whichever it offers.

Whether an output *moves* between two probes is judged by the same derived
bounds: beyond the sum of the two calls' bounds (``checking._apart``); no
tolerance here is picked by hand (docs/tolerances.md). Everything is bounded
in time (``SECONDS``) and plain data (``Divergence.to_dict``).

One idea a module: ``walk`` (the spec's values along a model and inside a
layer), ``checking`` (one piece through the implementation; two calls
compared), ``ablations`` (parameters changed so that a piece says nothing),
``layer_probe``, ``in_layer`` and ``sublayer_probes`` (the layer probe by
ablation, item 3), ``components`` (the component probe), ``model_probe`` and
``whole_model`` (the model entry under ablations, item 4),
``own_intermediates``, ``locating`` (the walk: ``locate``) and ``record`` (the
``Divergence`` record and how it is read).
"""

from __future__ import annotations

from .components import component_departures
from .locating import locate, locate_failure
from .record import SECONDS, Divergence, expected_matches
from .walk import MODEL_OF, Block, Step, layer_walk, model_inputs, model_walk, spec_intermediates

__all__ = ["MODEL_OF", "SECONDS", "Block", "Divergence", "Step", "component_departures", "expected_matches",
           "layer_walk", "locate", "locate_failure", "model_inputs", "model_walk", "spec_intermediates"]
