"""The seed documents the project started from (../shared/seeds), and what
of each the spec can certify today: its preset, the entry that computes its
whole model, the entries that compute its parts, and what it cannot express.

Data only (no arithmetic), shown by ``ftspec spec seeds``. What each row
claims is tested: tests/spec/test_seeds.py (seeds 000, 002, 003, each
transcribed from its text), tests/spec/test_seed_models.py (the whole
models of seeds 000 and 002), tests/tools/test_seed_certificates.py (those
models written from the documents and certified under their presets) and
tests/spec/test_seed_004.py (seed 004's printed tables); a document no
entry computes whole says so (``NONE_YET``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DIRECTORY", "NONE_YET", "SEEDS", "SHORT", "Part", "Seed", "find", "rows"]

#: Where the documents are, relative to the repository (docs cite them so).
DIRECTORY = "../shared/seeds"
#: What ``whole_model`` shows when no entry computes the whole model.
NONE_YET = "none yet"


#: Registry entries and what they compute of a document.
Part = tuple[tuple[str, ...], str]


@dataclass(frozen=True)
class Seed:
    """One seed document and what the spec makes of it."""

    number: str  # "000": the file name's prefix, and how the docs name the seed
    file: str
    title: str
    author: str
    preset: str
    whole_model: tuple[str, ...]  # entries computing the document's whole model; () when none yet
    parts: tuple[Part, ...]  # entries that compute parts of it, and which parts
    cannot_express: tuple[str, ...]
    tested_in: str

    @property
    def name(self) -> str:
        """How the docs name it: ``seed 004 (numeric tutorial)``."""
        return f"seed {self.number} ({SHORT[self.number]})"

    @property
    def whole_model_text(self) -> str:
        return ", ".join(self.whole_model) or NONE_YET

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.number, "name": self.name, "file": self.file, "title": self.title,
                "author": self.author, "preset": self.preset, "whole_model": list(self.whole_model),
                "whole_model_text": self.whole_model_text,
                "parts": [{"entries": list(entries), "what": what} for entries, what in self.parts],
                "cannot_express": list(self.cannot_express), "tested_in": self.tested_in}


#: The short name the docs use after the number ("seed 000 (compact definition)").
SHORT = {"000": "compact definition", "001": "the paper", "002": "Thickstun",
         "003": "named tensors", "004": "numeric tutorial"}

SEEDS: tuple[Seed, ...] = (
    Seed("000", "000_e559488fd924bfec.txt", "Compact precise definition of a transformer function", "",
         preset="compact-000", whole_model=("next_token_encoder",),
         parts=((("encoder_layer",), "each of its L post-LN layers (eq. 6)"),
                (("d_transformer",), "its causal variation, under compact-000+final_norm=none"),
                (("next_token_encoder",), "its other variations, as switches on compact-000: "
                 "norm_placement=res_post (LayerNorm of the changes only), mlp_depth (more FFN "
                 "layers), activation=silu or gelu_*, affine (γ, β), attn_bias, unembedding=tied, "
                 "positions=sinusoidal_paper (base T)")),
         cannot_express=(
             "an FFN with more than three hidden layers (mlp_depth is 1 to 3)",
         ),
         tested_in="tests/spec/test_seed_models.py"),
    Seed("001", "001_e547f0ab3c0ee644.txt", "Formal Algorithms for Transformers", "Phuong & Hutter",
         preset="phuong-hutter", whole_model=("ed_transformer", "e_transformer", "d_transformer"),
         parts=(((), "every algorithm: ftspec spec algorithms"),),
         cannot_express=(),
         tested_in="tests/spec/test_paper_literal.py"),
    Seed("002", "002_08d83349baf90c6e.txt", "Transformer Networks", "John Thickstun",
         preset="thickstun-002", whole_model=("next_token_encoder",),
         parts=((("encoder_layer",), "its transformer block"),
                (("embedding",), "its input with sinusoidal positions")),
         cannot_express=(
             "eq. 12's input W_zxᵀ ReLU(W_xᵀ x_k) + p_k (x_1 in its text) is, for one-hot "
             "tokens, a lookup in the table W_zxᵀ ReLU(W_xᵀ) = W_e: an adapter passes "
             "W_x = I and W_zx = W_eᵀ (the preset cannot say so)",
             "its positions k read from 1: it numbers the objects x_1 … x_p but does not "
             "say where k starts; the spec reads k from 0, as Vaswani et al.",
         ),
         tested_in="tests/spec/test_seeds.py"),
    Seed("003", "003_b13f05831a645e5c.txt", "Transformers using Named Tensor Notation", "Marc Lelarge",
         preset="named-tensor-003", whole_model=("encoder_layer",),
         parts=((("encoder_layer",), "its pre-LN block, which is the whole document"),),
         cannot_express=(
             "W_o = I: its block has no output projection, and one head ('we omit multiple "
             "heads here'); an adapter folds the W_o ftspec draws into the value map, "
             "W_V' = (W_o W_v)ᵀ, b_V' = W_o b_v + b_o, and declares H = 1 (the preset "
             "cannot say so)",
             "ε: the document leaves it unspecified; 1e-5 inside the root is the project's "
             "choice, not the document's",
         ),
         tested_in="tests/spec/test_seeds.py"),
    Seed("004", "004_633e602a836c2656.txt", "Notes on Transformers (DRAFT)", "Paul F. Roysdon",
         preset="tutorial-004", whole_model=("embedding", "encoder_layer"),
         parts=((("embedding",), "E = W + P (tokens as columns)"),
                (("encoder_layer",), "its layer, II.G-K (Q to A(9)), with its one-layer FFN "
                 "(mlp='one_layer'); its tables put tokens in rows: an adapter transposes"),
                (("attention", "mh_attention", "layer_norm"), "A(4), A(5), A(7)")),
         cannot_express=(
             "the composition its numbers make: it feeds E, built with tokens as columns, "
             "to its row-reading encoder unchanged, so its printed A(9) is encoder_layer "
             "on X = Eᵀ, a layout slip that runs only because d = ℓ = 6; no entry computes "
             "it, and a plugin written so is not the algorithm (the whole model above is "
             "the embedding, then the layer on E)",
             "its printed intermediates (Q, K, V, A(1)-A(3), μ, σ, L) are encoder_layer's "
             "recorded ones, checked by its tests and identify --table, but no entry "
             "returns them: a certificate does not cover them",
             "its decoder's output layer, which flattens A(10) into one 1×36 vector",
         ),
         tested_in="tests/spec/test_seed_004.py"),
)


def rows() -> list[dict[str, Any]]:
    """Every seed as a plain dictionary (``ftspec spec seeds --json``)."""
    return [s.to_dict() for s in SEEDS]


def find(key: str) -> Seed:
    """The seed named by its number ("4", "004"), file name or preset; ValueError otherwise."""
    text = key.strip()
    for s in SEEDS:
        if text in (s.file, s.preset) or (text.isdigit() and int(text) == int(s.number)):
            return s
    known = ", ".join(s.number for s in SEEDS)
    raise ValueError(f"unknown seed {key!r}; give a number ({known}), a file name or a preset")
