"""The zoo's T5 mutants of the encoder-decoder (issue 38): ``t5-table-per-layer`` (each layer reading a table of
its own, so the later layers, which hold none, add no bias) and ``t5-decoder-reads-encoder-table`` (the decoder's
self-attention biased from the encoder's table) are each caught by a default float32 search of ``ed_transformer``
by a plugin that declares T5 v1.0's set, and the first divergence on a fixed case names the convention: the model
agrees once both relative-bias tables are 0 (and, for the second, once the decoder's table is the encoder's). The
correct NumPy plugin passes the same search, and each mutant is the correct plugin without the bias.
"""

from __future__ import annotations

import dataclasses

import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.execute import Member
from ftspec.conformance.forensics.divergence import locate
from ftspec.conformance.running import failures
from ftspec.spec.variants import parse
from ftspec.tools.zoo import build, mutant

from .zoo_search import declared_search

T5 = parse("attn_bias=False,attn_scale=none,rel_bias=t5_buckets,norm=rms_norm,epsilon=1e-6,"
           "epsilon_placement=inside_root,affine=scale,norm_placement=pre,final_norm=final,mlp_bias=False,"
           "activation=relu,positions=none,unembedding=tied,unembedding_scale=inv_sqrt_d_e")
MUTANTS = ("t5-table-per-layer", "t5-decoder-reads-encoder-table")


@pytest.mark.parametrize("name", MUTANTS)
def test_the_mutant_is_caught_by_a_default_search(tmp_path, monkeypatch, name):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(name)
    cell = declared_search(m.id, T5, m.bench[0], tmp_path)
    assert cell.status.value == "fail", (cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", cell.failure


@pytest.mark.parametrize("name", MUTANTS)
def test_the_first_divergence_names_the_stacks_tables(name):
    """Two layers a stack and 6/5 buckets, so that both mutants depart on the case."""
    v = T5.replace(rel_buckets=6, rel_max_distance=5)
    hyper = dict(N_V=7, ell_max=6, L_enc=2, L_dec=2, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell_z=5, ell_x=5)
    p = rounded(Case.build("ed_transformer", hyper, v, seed=2), "float32")
    m = mutant(name)
    d = locate(Member(m.id, dataclasses.replace(build(m), variants=(v,)), "cpu"), "ed_transformer", p.inputs,
               p.params, hyper, v, "float32")
    assert d.where == "relative-bias tables", (d.where, d.detail)
    assert "rel_bias='t5_buckets'" in d.detail
    assert ("reads the encoder's table" in d.detail) == (name == "t5-decoder-reads-encoder-table"), d.detail


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    cell = declared_search("numpy", T5, "ed_transformer", tmp_path, examples=60)
    assert cell.status.value == "pass", (cell.status, cell.failure)


@pytest.mark.parametrize("name", MUTANTS)
def test_the_mutant_is_the_correct_plugin_without_the_bias(tmp_path, name):
    m = mutant(name)
    cell = declared_search(m.id, T5.replace(rel_bias="none"), "ed_transformer", tmp_path, examples=30)
    assert cell.status.value == "pass", (cell.status, cell.failure)
