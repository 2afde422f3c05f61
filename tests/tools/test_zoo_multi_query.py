"""The zoo's multi-query mutant (``multi-query-read-as-kv-group``: ``kv_heads="one"`` sized by kv_group alone, so
that H key/value heads of their own are expected where one is shared) is caught by a default float32 search of
the entries its bench run searches, declared under a multi-query set (Falcon-7B's attention: one kv head, RoPE,
no biases) whose H the strategies draw freely. In the spec's layout the slip cannot compute: the one kv head's
``kv_heads.0`` is given where ``heads.{h}.W_k`` is read, so the search fails by the plugin's exception, at the
first drawn case with two heads or more (H = 1 is the head's own kv head: equivalent). The correct NumPy plugin
passes the same search (the last test).
"""

from __future__ import annotations


import pytest

from ftspec.conformance.running import failures
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo import mutant

from .zoo_search import declared_search

MULTI_QUERY = PAPER.replace(kv_heads="one", attn_bias=False, rotary="half")


@pytest.mark.parametrize("entry", mutant("multi-query-read-as-kv-group").bench)
def test_the_mutant_is_caught_by_a_default_search_under_multi_query(entry, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant("multi-query-read-as-kv-group")
    cell = declared_search(m.id, MULTI_QUERY, entry, tmp_path)
    assert cell.status.value == "fail", (cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.case.hyper["H"] > 1, cell.failure


def test_the_correct_plugin_passes_the_same_search(tmp_path):
    cell = declared_search("numpy", MULTI_QUERY, "causal_self_attention", tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)
