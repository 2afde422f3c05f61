"""ftspec.spec: the formal algorithms of Phuong & Hutter (2022), executable.

Pure Python (no NumPy, PyTorch or JAX): every algorithm is written once over
the interface of ``spec.numbers`` and runs in binary64 with correctly rounded
sums (default), in mpmath at a chosen precision, or with running error
bounds. ``REGISTRY`` lists the algorithms; ``evaluate`` runs one by name on
canonical inputs and flat parameters. See docs/spec.md.
"""

from __future__ import annotations

from .architectures import d_transformer, e_transformer, ed_transformer, next_token_encoder
from .attention import attention, basic_single_query_attention, mh_attention, unidirectional_mask
from .embedding import (
    embed,
    positional_embedding,
    sinusoidal_halves,
    sinusoidal_paper,
    sinusoidal_raw_index,
    sinusoidal_vaswani,
    token_embedding,
)
from .errors import SpecError
from .layers import bert_layer, decoder_layer, encoder_layer, gpt2_layer
from .normalization import layer_norm, rms_norm
from .numbers import FLOAT, MpNumbers, NumberSystem, TrackedNumbers, using
from .registry import REGISTRY, Entry, Kind, TensorSpec, entry
from .unembedding import unembedding
from .evaluation import evaluate, resolve_hyper, to_floats
from .variants import PAPER, PRESETS, SWITCHES, VariantSet, preset

#: Version of the mathematics stated here; fixtures and certificates record it.
SPEC_VERSION = "2.17.0"

__all__ = [
    "FLOAT",
    "MpNumbers",
    "NumberSystem",
    "PAPER",
    "PRESETS",
    "REGISTRY",
    "SPEC_VERSION",
    "SWITCHES",
    "Entry",
    "Kind",
    "SpecError",
    "TensorSpec",
    "TrackedNumbers",
    "VariantSet",
    "attention",
    "basic_single_query_attention",
    "bert_layer",
    "d_transformer",
    "decoder_layer",
    "e_transformer",
    "ed_transformer",
    "embed",
    "encoder_layer",
    "entry",
    "evaluate",
    "gpt2_layer",
    "layer_norm",
    "mh_attention",
    "next_token_encoder",
    "positional_embedding",
    "preset",
    "resolve_hyper",
    "rms_norm",
    "sinusoidal_halves",
    "sinusoidal_paper",
    "sinusoidal_raw_index",
    "sinusoidal_vaswani",
    "to_floats",
    "token_embedding",
    "unembedding",
    "unidirectional_mask",
    "using",
]
