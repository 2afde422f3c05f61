"""``ftspec spec``: browse the spec's registry, parameter names, variants and seed documents, and
print the spec's named intermediate values of one entry on one case."""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import textwrap
from typing import Any, Sequence

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
                   help="preset or family name (ftspec spec families), JSON, preset+switch=value,... or "
                        "switch=value,... (default: %(default)s)")
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
    f = s.add_parser("families", help="the model families people ship: the set each is declared by",
                     description="Each model family (GPT-2, BERT, BART, Marian, Llama, Mistral, Qwen, Gemma, Phi, "
                                 "GPT-NeoX, GPT-J, Falcon, Mixtral, OPT, BLOOM, MPT): the name a declaration "
                                 "writes (a preset, or a family name read as one), the switches it stands for, "
                                 "the sizes a configuration adds and the plugin that certifies it "
                                 "(spec/variants.py, FAMILIES).")
    f.add_argument("family", nargs="?", help="one family, by name (default: all)")
    f.add_argument("--json", action="store_true")
    f.set_defaults(func=_families)
    i = s.add_parser("intermediates", help="the spec's named intermediate values of one entry, with their bounds",
                     description="Evaluate one component, layer or architecture entry on a case and print every "
                                 "value the spec computes on the way (an attention head's Q, K, V, scores S and "
                                 "weights A, each norm's mu and sigma, the MLP's hidden layer, the residual sums, "
                                 "..., names in docs/plugins.md 'Named intermediates'), each with its Monte "
                                 "Carlo rounding bound at --dtype: how far an implementation computing in that "
                                 "dtype may depart from it. Inputs are rounded to --dtype first, as the harness "
                                 "judges. The case is the entry's default deterministic one (--hyper, --seed), "
                                 "or a case file (ftspec replay's) or a table file (ftspec-table/1) given by "
                                 "--case; a table names no variant set: give it (--preset, --variant), else "
                                 "the paper's with the table's parameter structure is used.")
    i.add_argument("algorithm", metavar="ENTRY")
    which = i.add_mutually_exclusive_group()
    which.add_argument("--preset", metavar="P", help="a preset (ftspec spec variants)")
    which.add_argument("--variant", metavar="V",
                       help="preset or family name, JSON, preset+switch=value,... or switch=value,... "
                            "(default: the case's, or phuong-hutter)")
    i.add_argument("--case", metavar="FILE", help="a case file (docs/casefile.md) or table file (ftspec-table/1)")
    i.add_argument("--hyper", default="", metavar="K=V,...", help="sizes of the default case, e.g. L=1,d_e=4")
    i.add_argument("--seed", type=int, default=0, help="seed of the default case (default: %(default)s)")
    i.add_argument("--dtype", default=None,
                   help="dtype of the bounds and of the inputs' rounding (default: the table's, else float32)")
    i.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="only these intermediates: a name, a prefix (layers.0.attn) or a glob (*.sigma); "
                        "repeatable")
    i.add_argument("--list", action="store_true", help="names, shapes and largest bounds only, no values")
    i.add_argument("--bounds", action="store_true", help="print each element's bound too")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_intermediates)


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

    from .console import error

    if args.algorithm not in REGISTRY:
        return error(f"unknown algorithm {args.algorithm!r}; known: {', '.join(REGISTRY)}")
    e = REGISTRY[args.algorithm]
    try:
        variant = parse(args.variant)
        hyper = _hyper_items(args.hyper)
        for key, value in hyper.items():
            if value < 1:  # a shape is never empty or negative
                raise ValueError(f"{key} = {value}: a size is a whole number of at least 1")
    except ValueError as exc:
        return error(" ".join(str(exc).split()))
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


def _families(args: argparse.Namespace) -> int:
    from ftspec.spec.variants import FAMILIES

    from .console import error

    if args.family is not None and args.family not in FAMILIES:
        return error(f"no family {args.family!r}; families: {', '.join(FAMILIES)}")
    chosen = [FAMILIES[args.family]] if args.family is not None else list(FAMILIES.values())
    if args.json:
        print(json.dumps({"families": [f.to_dict() for f in chosen]}, indent=2, ensure_ascii=False))
        return 0
    print("Model families; a declaration writes the name, then its sizes: qwen3+kv_group=4.")
    for f in chosen:
        row = f.to_dict()
        print()
        lines = _wrapped("", f"{row['name']}: {row['title']}", _WIDTH, "  ")
        if row["declare"] != row["name"]:
            base, _, switches = row["declare"].partition("+")  # wrapped at the commas: read, not copied
            lines += _wrapped("  stands for   ", f"{base} with {switches.replace(',', ', ')}", _WIDTH)
        if row["padded"]:
            lines += _wrapped("  padded adds  ", row["padded"], _WIDTH)
        lines += _wrapped("  sizes        ", row["sizes"], _WIDTH)
        lines += _wrapped("  source       ", row["source"], _WIDTH)
        plugin = row["plugin"] + (f" ({', '.join(row['algorithms'])})" if row["algorithms"] else "")
        lines += _wrapped("  certified by ", plugin or "no bundled plugin", _WIDTH)
        print("\n".join(lines))
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


# -- ftspec spec intermediates --------------------------------------------------------------------

def _intermediates(args: argparse.Namespace) -> int:
    from ftspec.conformance.core.dtypes import FORMATS
    from ftspec.spec.registry import REGISTRY

    from .console import error

    name = args.algorithm
    if name not in REGISTRY:
        return error(f"unknown algorithm {name!r}; known: {', '.join(REGISTRY)}")
    try:
        case, dtype, origin = _intermediates_case(args)
    except (ValueError, OSError) as exc:  # CaseFileError and TableError are ValueErrors
        return error(" ".join(str(exc).split()))
    dtype = args.dtype or dtype
    if dtype not in FORMATS:
        return error(f"--dtype must be one of {', '.join(sorted(FORMATS))}, not {dtype!r}")
    from ftspec.conformance.core.examining import rounded
    from ftspec.conformance.core.intermediates import intermediate_references
    from ftspec.spec import SpecError

    prepared = rounded(case, dtype)
    try:
        items = intermediate_references(case.entry, prepared.inputs, prepared.params, hyper=case.hyper,
                                        variant=case.variant, dtype=dtype)
    except SpecError as exc:
        return error(str(exc))
    chosen = [it for it in items.values() if _selected(it.name, args.only)]
    if args.only and not chosen:
        return error(f"no intermediate of {name} matches {', '.join(args.only)}; ftspec spec intermediates "
                     f"{name} --list shows them")
    head = {"algorithm": name, "variant": case.variant.describe(), "hyper": dict(case.hyper), "case": origin,
            "dtype": dtype}
    if args.json:
        print(json.dumps({**head, "intermediates": [it.to_dict() for it in chosen]}, indent=1))
        return 0
    print("\n".join(intermediate_lines(head, chosen, values=not args.list, bounds=args.bounds)))
    return 0


def _intermediates_case(args: argparse.Namespace) -> tuple[Any, str, str]:
    """(the case, the default dtype, where the case came from) for ``spec intermediates``."""
    from ftspec.conformance.core.case import Case
    from ftspec.conformance.core.values import default_hyper
    from ftspec.spec.variants import parse, preset

    chosen = preset(args.preset) if args.preset else parse(args.variant) if args.variant else None
    if args.case:
        if args.hyper:
            raise ValueError("--hyper sets the sizes of the default case; a --case file has its own")
        from ftspec.conformance.core.intermediates import check_sizes

        case, dtype = _case_file(args.case)
        if case.algorithm != args.algorithm:
            raise ValueError(f"{args.case} holds a case of {case.algorithm}, not {args.algorithm}")
        check_sizes(case.entry, case.hyper)  # a case file's sizes are bounded, not its work
        if chosen is not None:
            case.variant = chosen
        return case, dtype, str(args.case)
    from ftspec.conformance.core.intermediates import check_sizes
    from ftspec.spec.registry import REGISTRY

    hyper = _hyper_items(args.hyper)
    variant = chosen or preset("phuong-hutter")
    entry = REGISTRY[args.algorithm]
    check_sizes(entry, {k: v for k, v in hyper.items() if k in entry.hyper})  # before NumPy sees them
    full = default_hyper(args.algorithm, variant, **hyper)
    check_sizes(entry, full, given=hyper)  # the sizes as the variant fits them; nothing built yet
    case = Case.build(args.algorithm, full, variant, seed=args.seed)
    return case, "float32", f"default case, seed {args.seed}"


def _case_file(path: str) -> tuple[Any, str]:
    """A case file's case, or a table file's inputs and parameters as a case (and the table's dtype)."""
    from ftspec.conformance.core.case import Case
    from ftspec.conformance.core.casefile import read_case, read_untrusted_json
    from ftspec.conformance.forensics.table_file import FORMAT, LIMITS, TableError, _structure, parse_table

    try:
        doc = read_untrusted_json(path, what="case or table file", limit=LIMITS["json_bytes"], error=TableError)
    except TableError as exc:
        raise TableError(f"{path}: {exc}") from None
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        try:
            table = parse_table(doc)
        except TableError as exc:
            raise TableError(f"{path}: {exc}") from None
        variant = _structure(table.entry, table.hyper, table.params)
        return Case(table.entry.name, dict(table.hyper), variant, dict(table.inputs), dict(table.params)), table.dtype
    case, meta = read_case(path)
    return case, str(meta.get("dtype") or "float32")


def _selected(name: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(name == p or name.startswith(p + ".") or fnmatch.fnmatchcase(name, p)
                               for p in patterns)


#: one printed number: 6 significant digits right-aligned in 12 characters, 6 to a line
_CELL, _PER_LINE = 12, 6


def _number(x: float) -> str:
    return f"{x:.6g}".rjust(_CELL) if math.isfinite(x) or math.isnan(x) else ("-inf" if x < 0 else "inf").rjust(_CELL)


def _grid(a: Any, indent: str = "  ") -> list[str]:
    """A scalar, vector or matrix as lines of at most ``_PER_LINE`` numbers; a matrix wider than that
    in blocks of columns, each headed by its column range."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return [indent + _number(float(a)).strip()]
    if a.ndim == 1:
        a = a[None, :]
    rows, cols = a.shape[0], a.shape[-1]
    a = a.reshape(rows, cols)
    out = []
    for start in range(0, cols, _PER_LINE):
        stop = min(cols, start + _PER_LINE)
        if cols > _PER_LINE:
            out.append(f"{indent}columns {start}-{stop - 1}:" if stop - start > 1 else f"{indent}column {start}:")
        out += [indent + "".join(_number(float(x)) for x in row[start:stop]) for row in a]
    return out


def intermediate_lines(head: dict[str, Any], items: Sequence[Any], *, values: bool = True,
                       bounds: bool = False, width: int = _WIDTH) -> list[str]:
    """``ftspec spec intermediates`` as lines of at most ``width`` characters: a heading, then per
    intermediate its name, shape and largest bound, and (``values``) its values in the spec's
    layout ((rows, columns): tokens are columns), (``bounds``) each element's bound."""
    import numpy as np

    hyper = ", ".join(f"{k}={v}" for k, v in head["hyper"].items())
    out = _wrapped("", f"{head['algorithm']} under {head['variant']}, {hyper}; {head['case']}; "
                       f"{len(items)} intermediates; inputs rounded to {head['dtype']}, bounds at {head['dtype']} "
                       "(the Monte Carlo rounding spread × safety: how far an implementation in that dtype may "
                       "depart)", width, "  ")
    for it in items:
        shape = "(" + ", ".join(map(str, it.shape)) + ("," if len(it.shape) == 1 else "") + ")"
        top = float(np.max(it.bound)) if it.bound.size else 0.0
        bound = "exact" if top == 0 else f"bound <= {top:.2g}"
        line = f"{it.name}  {shape}  {bound}"
        if values:
            out.append("")
        out += _wrapped("", line, width, "    ")
        if values:
            out += _grid(it.value)
        if values and bounds and top > 0:
            out.append("  bound per element:")
            out += _grid(it.bound)
    return out


def _hyper_items(text: str) -> dict[str, int]:
    """``--hyper K=V,...`` as a dict of whole numbers (ValueError, one line, for an item that is not
    K=V with an integer V; the caller bounds them)."""
    hyper: dict[str, int] = {}
    for item in (x for x in text.split(",") if x):
        key, eq, value = item.partition("=")
        if not eq or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"cannot read --hyper item {item!r}; expected K=V with an integer V")
        hyper[key.strip()] = int(value)
    return hyper
