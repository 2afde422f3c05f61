"""``ftspec spec``: browse the spec's registry, parameter names, variants and seed documents."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("spec", help="browse the spec: algorithms, parameter names, variants, seeds",
                       description="Show the registry of algorithms, the flat parameter names and shapes of an "
                                   "algorithm for given hyperparameters and variant, the variant catalogue, or "
                                   "the seed documents and what the spec certifies of each.")
    s = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    a = s.add_parser("algorithms", help="every registry entry with its paper number, inputs and outputs")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=_algorithms)
    q = s.add_parser("params", help="flat parameter names and shapes of one algorithm")
    q.add_argument("algorithm")
    q.add_argument("--variant", default="phuong-hutter",
                   help="preset name, JSON, or preset+switch=value,... (default: %(default)s)")
    q.add_argument("--hyper", default="", metavar="K=V,...",
                   help="hyperparameters, e.g. L=2,H=4,d_e=16 (unknown ones are left symbolic)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_params)
    v = s.add_parser("variants", help="the variant switches and presets")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=_variants)
    d = s.add_parser("seeds", help="each seed document: its preset, whole-model entry, what it cannot express",
                     description="The documents the project started from (../shared/seeds): for each, its "
                                 "preset, the entry that computes its whole model, the entries for its parts, "
                                 "and what the spec cannot express of it.")
    d.add_argument("seed", nargs="?", help="one seed: its number (004), file name or preset (default: all)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=_seeds)


def _algorithms(args: argparse.Namespace) -> int:
    from ftspec.spec.registry import REGISTRY

    rows = [{"name": e.name, "paper": e.title, "family": e.family, "summary": e.summary,
             "hyper": list(e.hyper), "inputs": {i.name: [list(i.shape), i.kind] for i in e.inputs},
             "outputs": {o.name: [list(o.shape), o.kind] for o in e.outputs}, "switches": sorted(e.switches)}
            for e in REGISTRY.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.markup import escape
    from rich.table import Table

    from .console import Fitted, console

    def shaped(name: str, shape: tuple) -> str:  # X(d_e, ell): short words, so that 80 columns hold the names
        return f"{name}({', '.join(map(str, shape))})"

    t = Table(title="ftspec spec registry")
    for col in ("name", "paper", "inputs", "output"):
        t.add_column(col)
    for e in REGISTRY.values():  # titles hold brackets ("Mask[t_z, t_x]"): escaped for rich
        inputs = ", ".join(shaped(i.name, tuple(i.shape)) for i in e.inputs) or "-"
        t.add_row(escape(e.name), escape(e.title), escape(inputs),
                  escape(", ".join(shaped(o.name, tuple(o.shape)) for o in e.outputs)))
    console.print(Fitted(lambda: [t]))  # no algorithm name cut at 80 columns
    return 0


def _params(args: argparse.Namespace) -> int:
    from ftspec.spec.registry import REGISTRY
    from ftspec.spec.variants import parse

    if args.algorithm not in REGISTRY:
        print(f"error: unknown algorithm {args.algorithm!r}; known: {', '.join(REGISTRY)}")
        return 2
    e = REGISTRY[args.algorithm]
    try:
        variant = parse(args.variant)
        hyper = {k: int(v) for k, v in (item.split("=", 1) for item in args.hyper.split(",") if item)}
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    for s in e.structural:
        hyper.setdefault(s, 1)
    schema = e.param_schema(hyper, variant)
    rows = []
    for name, shape in schema.items():
        resolved = []
        for d in shape:
            try:
                from ftspec.spec.params import resolve_shape

                resolved.append(resolve_shape((d,), hyper)[0])
            except KeyError:
                resolved.append(d)
        rows.append({"name": name, "shape": resolved, "symbolic": list(shape)})
    if args.json:
        print(json.dumps({"algorithm": e.name, "variant": variant.describe(), "hyper": hyper, "params": rows},
                         indent=2))
        return 0
    print(f"{e.title}: parameters under {variant.describe()} with {hyper or 'symbolic sizes'}")
    for r in rows:
        print(f"  {r['name']:40s} {tuple(r['shape'])}")
    return 0


def _variants(args: argparse.Namespace) -> int:
    from ftspec.spec.variants import PRESETS, SWITCHES

    if args.json:
        print(json.dumps({"switches": {k: {"group": s.group, "choices": list(s.choices), "paper": s.paper,
                                           "meaning": s.meaning} for k, s in SWITCHES.items()},
                          "presets": {k: {"json": json.loads(v.to_json()), "hash": v.hash,
                                          "differences": v.differences()} for k, v in PRESETS.items()}},
                         indent=2))
        return 0
    for k, s in SWITCHES.items():
        print(f"{s.group:14s} {k:18s} {' | '.join(map(str, s.choices))}\n{'':33s}{s.meaning}")
    print()
    for k, v in PRESETS.items():
        diff = ", ".join(f"{a}={b}" for a, b in v.differences().items()) or "(the paper's choices)"
        print(f"{k:22s} {v.hash}  {diff}")
    return 0


#: The width the seed listing is wrapped to (an 80-column terminal).
_WIDTH = 80


def _seeds(args: argparse.Namespace) -> int:
    from ftspec.spec.seeds import DIRECTORY, SEEDS, find

    from .console import error

    try:
        chosen = [find(args.seed)] if args.seed is not None else list(SEEDS)
    except ValueError as exc:
        return error(str(exc))
    if args.json:
        print(json.dumps({"directory": DIRECTORY, "seeds": [s.to_dict() for s in chosen]}, indent=2,
                         ensure_ascii=False))
        return 0
    print(f"Seed documents (in {DIRECTORY}); ftspec spec seeds NUMBER shows one.")
    for s in chosen:
        print()
        print("\n".join(seed_lines(s.to_dict())))
    return 0


def seed_lines(row: dict[str, Any], width: int = _WIDTH) -> list[str]:
    """One seed as labelled lines wrapped to ``width``: title, file, preset, entries, gaps."""
    by = f", {row['author']}" if row["author"] else ""
    out = _wrapped("", f"{row['name']}: {row['title']}{by}", width, "  ")
    out += _wrapped("  file         ", row["file"], width)
    out += _wrapped("  preset       ", row["preset"], width)
    out += _wrapped("  whole model  ", row["whole_model_text"], width)
    for i, part in enumerate(row["parts"]):
        text = f"{', '.join(part['entries'])}: {part['what']}" if part["entries"] else part["what"]
        out += _wrapped("  parts        " if i == 0 else "", text, width, first=" " * 15)
    gaps = row["cannot_express"] or ["nothing known"]
    for i, gap in enumerate(gaps):
        out += _wrapped("  cannot       " if i == 0 else "", f"- {gap}", width, " " * 17, " " * 15)
    out += _wrapped("  tested in    ", row["tested_in"], width)
    return out


def _wrapped(label: str, text: str, width: int, indent: str = " " * 15, first: str = "") -> list[str]:
    """``label`` (or ``first``) then ``text`` wrapped to ``width``; continuation lines start with
    ``indent``. An equation ("W_mlp2 = I") is never split over two lines."""
    kept = text.replace(" = ", "\u00a0=\u00a0")  # textwrap breaks at ASCII spaces only
    lines = textwrap.wrap(kept, width=width, initial_indent=label or first, subsequent_indent=indent,
                          break_long_words=False, break_on_hyphens=False)
    return [line.replace("\u00a0", " ") for line in lines]
