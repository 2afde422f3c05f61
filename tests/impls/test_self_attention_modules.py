"""A GPT codebase's attention module certifies on its own (issue 27, item 6).

``CausalSelfAttention`` below is written the way nanoGPT and minGPT write theirs
(from memory of their structure, not copied): one fused ``c_attn`` Linear makes
q, k and v, the heads are split by ``view`` and ``transpose``, PyTorch's
``scaled_dot_product_attention(..., is_causal=True)`` builds the causal mask
itself, and ``c_proj`` projects the merged heads. It takes x alone, (B, T, C),
so before the ``causal_self_attention`` entry (Algorithm 5 with Z = X and
Mask[t_z, t_x] = [[t_z ≤ t_x]], Alg. 10 line 6) it could be tested only inside a
whole layer.

The plugin is the module plus an adapter that only moves ftspec's parameters
into it (the flat names of spec/params.py: ``heads.{h}.W_q`` ..., ``W_o``,
``b_o``; weights out × in, as ``nn.Linear`` stores them) and transposes the
sequence (tokens as columns in ftspec, as rows in the module). The module ties
d_attn = d_mid = C / n_head and d_out = C, which it declares as ``Limits``; its
variant sets are the ``nanogpt`` preset (whose attention switches are the
paper's: scale 1/√d_attn on the scores, as SDPA's CPU kernel for 4-D inputs
applies it, impls/torch_nn) with the config's ``bias`` True or False (nanoGPT's
``bias=False`` drops the biases of both Linears, as ``attn_bias=False`` drops
b_q, b_k, b_v and b_o).

It is certified through ``conformance.session.commands.certify``, the call
behind ``ftspec certify`` (quick profile, float64 and float32); the same module
with ``is_causal=False`` (an encoder's attention in a decoder) or without the
1/√d scale (``scale=1.0``) is not.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ftspec.conformance.session.commands import Settings, certify
from ftspec.impls.api import Context, Implementation, Limits
from ftspec.spec.variants import preset

NANOGPT = preset("nanogpt")
_DTYPES = {"float64": torch.float64, "float32": torch.float32}
_ALL_DTYPES = {**_DTYPES, "int64": torch.int64, "bool": torch.bool}  # what from_numpy may be asked for


class CausalSelfAttention(nn.Module):
    """nanoGPT-style multi-head causal self-attention: x (B, T, C) → y (B, T, C).

    ``is_causal`` and ``scale`` exist only to plant the bugs the tests look for (SDPA's own
    ``scale=None`` is 1/√(C / n_head))."""

    def __init__(self, n_embd: int, n_head: int, bias: bool = True, is_causal: bool = True,
                 scale: Optional[float] = None) -> None:
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)  # q, k, v for all heads, in one matmul
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head, self.n_embd = n_head, n_embd
        self.is_causal, self.scale = is_causal, scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)  # each (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=self.is_causal,
                                           scale=self.scale)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again
        return self.c_proj(y)


# -- the adapter: ftspec's parameters into the module, layout at the boundary --------------------------


def _count_heads(params: Mapping[str, Any]) -> int:
    n = 0
    while f"heads.{n}.W_q" in params:
        n += 1
    return n


def _load(target: torch.Tensor, value: torch.Tensor, name: str) -> None:
    """Copy ``value`` into the module's tensor, refusing another shape (``copy_`` would broadcast)."""
    if tuple(value.shape) != tuple(target.shape):
        raise ValueError(f"{name}: shape {tuple(value.shape)}, the module needs {tuple(target.shape)}")
    target.copy_(value)


def load_module(params: Mapping[str, torch.Tensor], n_embd: int, bias: bool, dtype: torch.dtype,
                **bug: Any) -> nn.Module:
    """The module with ftspec's parameters: c_attn's rows are [W_q; W_k; W_v], each the heads' matrices
    stacked in head order (``view(B, T, nh, hs)`` reads head h from rows h·hs … (h+1)·hs − 1); c_proj is
    W_o, whose column h·hs + j multiplies row j of head h in the merged y (the paper's Y = [Y¹; …; Y^H])."""
    H = _count_heads(params)
    module = CausalSelfAttention(n_embd, H, bias=bias, **bug).to(dtype)
    heads = range(H)
    with torch.no_grad():
        _load(module.c_attn.weight, torch.cat([params[f"heads.{h}.{w}"] for w in ("W_q", "W_k", "W_v")
                                               for h in heads]), "heads.*.W_q, W_k, W_v")
        _load(module.c_proj.weight, params["W_o"], "W_o")
        if bias:
            _load(module.c_attn.bias, torch.cat([params[f"heads.{h}.{b}"] for b in ("b_q", "b_k", "b_v")
                                                 for h in heads]), "heads.*.b_q, b_k, b_v")
            _load(module.c_proj.bias, params["b_o"], "b_o")
    return module


def nanogpt_attention(**bug: Any) -> Implementation:
    """The module as an ftspec plugin of ``causal_self_attention``; ``bug``: is_causal=False or scale=1.0."""
    def causal_self_attention(inputs: Mapping[str, torch.Tensor], params: Mapping[str, torch.Tensor],
                              ctx: Context) -> torch.Tensor:
        X = inputs["X"]  # (B, d_e, ℓ) or (d_e, ℓ): tokens as columns
        module = load_module(params, X.shape[-2], ctx.variant.attn_bias, _DTYPES[ctx.dtype], **bug)
        x = X.transpose(-1, -2) if ctx.batched else X.T.unsqueeze(0)  # (B, ℓ, d_e): tokens as rows
        with torch.no_grad():
            y = module(x)  # (B, ℓ, d_e)
        return y.transpose(-1, -2) if ctx.batched else y[0].T  # back to columns

    return Implementation(
        name="-".join(("nanogpt-attention", *bug)), version="0.1.0",
        algorithms={"causal_self_attention": causal_self_attention}, dtypes=("float64", "float32"),
        devices=lambda: ["cpu"],
        from_numpy=lambda a, dtype, device: torch.from_numpy(np.array(a, copy=True)).to(_ALL_DTYPES[dtype]),
        to_numpy=lambda t: t.detach().cpu().numpy(),
        variants=[NANOGPT, NANOGPT.replace(attn_bias=False)],
        limits={"causal_self_attention": Limits(equal=(("d_attn", "d_mid"), ("d_e", "H*d_attn")))},
        description="a nanoGPT-style CausalSelfAttention (fused c_attn, SDPA is_causal=True, c_proj)")


def _certify(impl: Implementation, tmp_path, **settings: Any) -> dict:
    return certify(impl, Settings(profile="quick", in_process=True, case_dir=str(tmp_path / "cases"),
                                  **settings)).doc


def _cells(doc: dict) -> list[dict]:
    return [c for c in doc["results"] if c["status"] != "not implemented"]


def test_the_module_computes_the_entry_on_the_default_case():
    """Before any search: on the entry's default sizes (H = 2, d_e = 4, d_attn = d_mid = 2, within the
    limits) the module agrees with the spec to float64 rounding, and the planted bugs do not."""
    from ftspec.conformance.core.case import Case
    from ftspec.spec import evaluate

    case = Case.build("causal_self_attention", None, NANOGPT)
    want = np.array(evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper,
                             variant=NANOGPT)["V_tilde"])

    def run(impl: Implementation) -> np.ndarray:
        ctx = Context(case.algorithm, "float64", "cpu", case.hyper, NANOGPT)
        native = {k: impl.from_numpy(v, "float64", "cpu") for k, v in case.params.items()}
        return impl.to_numpy(impl.algorithms[case.algorithm]({"X": impl.from_numpy(case.inputs["X"], "float64",
                                                                                       "cpu")}, native, ctx))

    assert np.allclose(run(nanogpt_attention()), want, rtol=0, atol=1e-13)
    for bug in (dict(is_causal=False), dict(scale=1.0)):
        assert not np.allclose(run(nanogpt_attention(**bug)), want, rtol=0, atol=1e-3), bug


def test_a_gpt_attention_module_certifies_on_its_own(tmp_path):
    doc = _certify(nanogpt_attention(), tmp_path, examples=30)
    assert doc["verdict"] == "conformant", [c.get("failure") for c in doc["results"]]
    cells = _cells(doc)
    assert sorted((c["algorithm"], c["dtype"], c["status"]) for c in cells) == [
        ("causal_self_attention", "float32", "pass"), ("causal_self_attention", "float64", "pass")]
    assert all(c["examples"] >= 30 for c in cells)
    assert doc["subject"]["limits"]["causal_self_attention"]["equal"] == [["d_attn", "d_mid"], ["d_e", "H*d_attn"]]
    assert all(f["ok"] for f in doc["fixtures"])


@pytest.mark.parametrize("bug, named", [(dict(is_causal=False), []), (dict(scale=1.0), [{"attn_scale": "none"}])],
                         ids=["not-causal", "no-scale"])
def test_a_planted_bug_is_not_certified(bug, named, tmp_path):
    """Both fail on their values at both dtypes; the diagnosis names the missing scale as the catalogue's
    attn_scale="none" and names no convention for attending to the future (none describes it)."""
    doc = _certify(nanogpt_attention(**bug), tmp_path)
    assert doc["verdict"] == "non-conformant"
    cells = _cells(doc)
    assert sorted((c["dtype"], c["status"]) for c in cells) == [("float32", "fail"), ("float64", "fail")]
    for c in cells:
        assert c["failure"]["check"] == "spec"
        assert [m["changes"] for m in c["failure"]["diagnosis"]["matches"]] == named, c["dtype"]
