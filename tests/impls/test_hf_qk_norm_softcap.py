"""QK-norm and the attention soft cap as the spec states them are the library's: Hugging Face
transformers 5.24's own code, run at float32 on a drawn case, is judged conformant by the harness's
derived float32 bound (``tolerances.reference``, ``judge``), and fails the same judgement against the
set without the switch (so a misplaced or missing convention in the spec would fail here):

- Gemma 2's ``eager_attention_forward`` (models/gemma2/modeling_gemma2.py: scores ``* scaling``, then
  ``/ softcap``, ``tanh``, ``* softcap``, then ``+ attention_mask``) against Algorithm 4 under
  ``attn_softcap``;
- Qwen3's ``Qwen3DecoderLayer`` (models/qwen3/modeling_qwen3.py: ``q_norm``/``k_norm`` over
  ``head_dim`` before ``apply_rotary_pos_emb``), grouped, against the GPT-2 layer under Qwen3 as
  docs/spec.md declares it (``llama+qk_norm=rms,rope_base=1000000.0``).

The weights are mapped by hand here (the layouts are the library's: rows are tokens, W stored out × in);
the ``transformers`` plugin does not certify these families yet.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from ftspec.conformance.core.calling import Prepared
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec.variants import PAPER, parse

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _t(a: np.ndarray) -> "torch.Tensor":
    return torch.tensor(np.asarray(a, dtype=np.float32))


def _causal(ell: int) -> "torch.Tensor":
    """The library's additive causal mask (1, 1, ℓ_x, ℓ_z): −∞ above the diagonal."""
    return torch.full((ell, ell), float("-inf")).triu(1)[None, None]


def _judged(case: Case, p: Prepared, out: np.ndarray, name: str, without: dict) -> tuple[bool, bool]:
    ref = reference(case.entry, p.inputs, p.params, hyper=case.hyper, variant=case.variant, dtype="float32")
    params = {k: v for k, v in p.params.items() if not k.endswith(("gamma_q", "gamma_k"))}
    off = reference(case.entry, p.inputs, params, hyper=case.hyper, variant=case.variant.replace(**without),
                    dtype="float32")
    return judge(case.entry, {name: out}, ref).ok, judge(case.entry, {name: out}, off).ok


def test_gemma2s_eager_attention_is_algorithm_4_under_attn_softcap():
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

    v = PAPER.replace(attn_softcap=2.0, attn_bias=False)
    hyper = {"d_x": 4, "d_z": 4, "d_attn": 4, "d_out": 4, "ell_x": 4, "ell_z": 4}
    causal = np.array([[tz <= tx for tx in range(4)] for tz in range(4)])  # Mask[t_z, t_x]
    case = Case.build("attention", hyper, v, seed=3, given={"Mask": causal})
    p = rounded(case, "float32")
    X, Z = _t(p.inputs["X"]).T[None, None], _t(p.inputs["Z"]).T[None, None]  # (1, 1, ℓ, d): one head
    Q, K, V = X @ _t(p.params["W_q"]).T, Z @ _t(p.params["W_k"]).T, Z @ _t(p.params["W_v"]).T
    module = types.SimpleNamespace(num_key_value_groups=1, training=False, head_dim=4)
    with torch.no_grad():
        out, _ = eager_attention_forward(module, Q, K, V, _causal(4), dropout=0.0, scaling=4 ** -0.5, softcap=2.0)
    got = out[0, :, 0, :].numpy().T  # (d_out, ℓ_x)
    assert _judged(case, p, got, "V_tilde", {"attn_softcap": 0.0}) == (True, False)


def test_qwen3s_decoder_layer_is_the_gpt2_layer_under_qk_norm():
    from transformers import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RotaryEmbedding

    v = parse("llama+qk_norm=rms,rope_base=1000000.0,kv_group=2")
    H, G, d_e, d_attn, d_mlp, ell = 4, 2, 8, 4, 6, 4
    case = Case.build("gpt2_layer", {"H": H, "d_e": d_e, "d_attn": d_attn, "d_mid": d_attn, "d_mlp": d_mlp,
                                     "ell": ell}, v, seed=3)
    p = rounded(case, "float32")
    w = p.params
    config = Qwen3Config(hidden_size=d_e, intermediate_size=d_mlp, num_attention_heads=H, num_key_value_heads=H // G,
                         head_dim=d_attn, rms_norm_eps=v.epsilon, attention_bias=False,
                         rope_parameters={"rope_type": "default", "rope_theta": v.rope_base},
                         attn_implementation="eager")
    layer = Qwen3DecoderLayer(config, 0)
    stacked = {
        "input_layernorm.weight": w["gamma1"], "post_attention_layernorm.weight": w["gamma2"],
        "self_attn.q_proj.weight": np.concatenate([w[f"attn.heads.{h}.W_q"] for h in range(H)]),
        "self_attn.k_proj.weight": np.concatenate([w[f"attn.kv_heads.{g}.W_k"] for g in range(H // G)]),
        "self_attn.v_proj.weight": np.concatenate([w[f"attn.kv_heads.{g}.W_v"] for g in range(H // G)]),
        "self_attn.o_proj.weight": w["attn.W_o"], "self_attn.q_norm.weight": w["attn.gamma_q"],
        "self_attn.k_norm.weight": w["attn.gamma_k"], "mlp.gate_proj.weight": w["W_mlp1"],
        "mlp.up_proj.weight": w["W_mlp1_lin"], "mlp.down_proj.weight": w["W_mlp2"]}
    state = layer.state_dict()
    assert set(state) == set(stacked)  # every parameter of the library's layer is set, no other
    layer.load_state_dict({k: _t(a) for k, a in stacked.items()})
    X = _t(p.inputs["X"]).T[None]  # (1, ℓ, d_e)
    with torch.no_grad():
        cos_sin = Qwen3RotaryEmbedding(config)(X, torch.arange(ell)[None])
        out = layer(X, attention_mask=_causal(ell), position_embeddings=cos_sin)
    got = (out[0] if isinstance(out, tuple) else out)[0].numpy().T  # (d_e, ℓ)
    assert _judged(case, p, got, "X", {"qk_norm": "none"}) == (True, False)
