"""``identify``: which conventions an implementation, or a table of numbers, follows, as a library call.

    from ftspec.conformance.session import identify

    found = identify("torch-nn", algorithms=("layer_norm",))
    found.fits, found.merged, [i.expression() for i in found.identities]
    found.to_dict()   # the JSON ``ftspec identify --json`` writes (``ftspec-identify/1``)
    identify(table="examples/tables/gpt2_layer_hf_gpt2.json").fits

With a target, the implementation is called on a few designed cases per entry
and the variant switches each entry reads are searched
(conformance/forensics/identify/); with ``table``, the same for published
numbers (conformance/forensics/identify_table.py). ``ftspec identify``
(tools/cmd_identify.py) parses its arguments into this call and prints what
it returns; ``progress(event, **info)`` receives "start" (what is about to be
identified) and "entry" (each entry's ``Identity`` as it is found), so the
command prints as it goes. Bad input raises ``SessionError`` with one line,
before anything is called.

The implementation is loaded in this process (``discovery.load_target``), as
``ftspec identify`` always has: a plugin whose loading hangs hangs the call.
"""

from __future__ import annotations

import dataclasses
import difflib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from ftspec.impls.api import Implementation
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import VariantSet

from ..core.execute import Member
from ..forensics.identify import SECONDS, Identity, IdentifyError, Merged, call_variant, merge_all
from ..forensics.identify import identify as identify_entry
from .errors import SessionError

__all__ = ["DEFAULT_FAMILIES", "FORMAT", "Identification", "identify"]

#: families identified by default: their entries take seconds; training and inference entries only
#: when named in ``algorithms``
DEFAULT_FAMILIES = ("component", "layer", "architecture")
#: the JSON format of ``Identification.to_dict``
FORMAT = "ftspec-identify/1"

Target = Union[str, Implementation, tuple[str, Implementation]]


@dataclass
class Identification:
    """``identify``'s answer: each entry's ``Identity`` and, for an implementation, the sets merged
    over the entries (``merging``: with the switches no case separates and the changes from the
    declared set). ``fits``: every entry's identified set fits its cases; ``inconclusive``: some
    entry has no fitting set and candidates that could not be judged (a table whose printed
    inputs leave them unbounded), so neither a fit nor "nothing fits" can be said."""

    subject: str  # the implementation's label, or the table's path
    identities: list[Identity] = field(default_factory=list)
    table: Optional[str] = None  # the table's path (identified from a table)
    version: str = ""
    dtype: str = ""
    device: str = ""
    not_identified: list[str] = field(default_factory=list)  # offered, not identified by default
    merged: Optional[VariantSet] = None
    conflicts: list[str] = field(default_factory=list)
    seconds: float = 0.0
    merging: Optional[Merged] = None

    @property
    def fits(self) -> bool:
        return all(i.fits for i in self.identities)

    @property
    def inconclusive(self) -> bool:
        return any(i.inconclusive for i in self.identities)

    @property
    def untested(self) -> bool:
        """Every entry: no candidate could be judged on any case (nothing was tested)."""
        return bool(self.identities) and all(i.untested for i in self.identities)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, the ``ftspec identify --json`` document."""
        entries = [i.to_dict() for i in self.identities]
        verdict = {"fits": self.fits, "inconclusive": self.inconclusive, "untested": self.untested}
        if self.table is not None:
            return {"format": FORMAT, "table": self.table, "entries": entries, **verdict}
        merging = self.merging if self.merging is not None else merge_all(self.identities)
        if self.merged is not None and self.merged != merging.variant:  # set by the caller
            merging = dataclasses.replace(merging, variant=self.merged)
        return {"format": FORMAT, "implementation": self.subject, "version": self.version, "dtype": self.dtype,
                "device": self.device, "entries": entries, **verdict,
                "merged": {**merging.to_dict(), "conflicts": list(self.conflicts or merging.conflicts)},
                "not_identified": list(self.not_identified), "seconds": round(self.seconds, 3)}


def identify(target: Optional[Target] = None, *, table: Union[str, Path, None] = None,
             algorithms: Optional[Sequence[str]] = None, dtype: Optional[str] = None, device: Optional[str] = None,
             variant: Optional[VariantSet] = None, seconds: Optional[float] = None, call_timeout: float = 60.0,
             progress: Optional[Callable[..., None]] = None) -> Identification:
    """Identify ``target`` (a registered name, ``module:object``, an Implementation or a (label,
    Implementation) pair) entry by entry, or the numbers of ``table`` (a file, docs/diagnosis.md).

    ``algorithms``: the entries (default: every component, layer and architecture the
    implementation offers that reads a switch); ``dtype`` (default float64 where declared),
    ``device`` (default its first); ``variant``: the set to call it with (one it declares);
    ``seconds``: the budget per entry, calls included (default ``forensics.identify.SECONDS``);
    ``call_timeout``: one call taking longer is a refusal. A table names its entry and dtype,
    and takes none of those but ``seconds``."""
    budget = seconds or SECONDS
    say = progress or (lambda event, **info: None)
    if (target is None) == (table is None):
        raise SessionError("give a target (a registered name or module:object) or a table, not both")
    if table is not None:
        if algorithms or dtype or device or variant is not None:
            raise SessionError("a table names its entry and dtype: it takes no algorithms, dtype, device or variant")
        return _identify_table(str(table), budget, say)
    assert target is not None
    label, impl = _load(target)
    plan = _Plan.of(label, impl, algorithms, dtype, device, variant)
    say("start", subject=label, version=str(impl.version), dtype=plan.dtype, device=plan.device,
        entries=list(plan.names), not_identified=list(plan.skipped))
    started = time.perf_counter()
    member = Member(label, impl, plan.device)
    identities = []
    for name in plan.names:
        try:
            identity = identify_entry(member, REGISTRY[name], plan.dtype, variant=variant, seconds=budget,
                                      timeout=call_timeout)
        except IdentifyError as exc:
            raise SessionError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a harness bug at one entry: one line, not a traceback
            raise SessionError(f"{name}: identification failed: {type(exc).__name__}: {exc}") from None
        identities.append(identity)
        say("entry", identity=identity)
    merging = merge_all(identities)
    return Identification(label, identities, version=str(impl.version), dtype=plan.dtype, device=plan.device,
                          not_identified=list(plan.skipped), merged=merging.variant, conflicts=merging.conflicts,
                          seconds=time.perf_counter() - started, merging=merging)


def _identify_table(path: str, seconds: float, say: Callable[..., None]) -> Identification:
    from ..forensics.identify_table import TableError, identify_table, read_table

    try:
        table = read_table(path)
    except TableError as exc:
        raise SessionError(str(exc)) from None
    say("start", table=path, describe=table.describe())
    started = time.perf_counter()
    identity = identify_table(table, path, seconds=seconds)
    say("entry", identity=identity)
    return Identification(path, [identity], table=path, dtype=table.dtype, seconds=time.perf_counter() - started)


def _load(target: Target) -> tuple[str, Implementation]:
    """(label, implementation) of a target; a name or ``module:object`` is loaded here."""
    from ftspec.impls.discovery import PluginError, load_target

    if isinstance(target, str):
        try:
            return target, load_target(target)
        except PluginError as exc:
            raise SessionError(str(exc)) from None
    if isinstance(target, Implementation):
        return target.name, target
    if isinstance(target, tuple) and len(target) == 2 and isinstance(target[1], Implementation):
        return str(target[0]), target[1]
    raise SessionError(f"a target is a name, 'module:object', an Implementation or a (label, Implementation) "
                       f"pair; given {type(target).__name__}")


@dataclass(frozen=True)
class _Plan:
    """What an identification calls: its entries, dtype and device (checked before any call)."""

    names: tuple[str, ...]
    skipped: tuple[str, ...]
    dtype: str
    device: str

    @classmethod
    def of(cls, label: str, impl: Implementation, algorithms: Optional[Sequence[str]], dtype: Optional[str],
           device: Optional[str], variant: Optional[VariantSet]) -> "_Plan":
        names, skipped = _entries(impl, algorithms)
        chosen = dtype or ("float64" if "float64" in impl.dtypes else list(impl.dtypes)[0])
        if chosen not in impl.dtypes:
            raise SessionError(f"{impl.name} does not declare dtype {chosen}; it declares {', '.join(impl.dtypes)}")
        try:
            devices = [str(d) for d in impl.devices()]
        except Exception as exc:  # noqa: BLE001 - the plugin's failure
            raise SessionError(f"{impl.name}: devices() raised {type(exc).__name__}: {exc}") from None
        where = device or (devices[0] if devices else "cpu")
        if where not in devices:
            raise SessionError(f"{impl.name} has no device {where!r}; it has {', '.join(devices)}")
        try:
            for name in names:
                call_variant(impl, variant, name)  # refused before anything runs
        except IdentifyError as exc:
            raise SessionError(str(exc)) from None
        return cls(tuple(names), tuple(skipped), chosen, where)


def _entries(impl: Implementation, algorithms: Optional[Sequence[str]]) -> tuple[list[str], list[str]]:
    """(the entries to identify, those offered but left out by default)."""
    if algorithms:
        unknown = [a for a in algorithms if a not in REGISTRY]
        if unknown:
            near = difflib.get_close_matches(unknown[0], list(REGISTRY), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else "; see ftspec spec list"
            raise SessionError(f"unknown algorithm {unknown[0]!r}{hint}")
        missing = [a for a in algorithms if a not in impl.algorithms]
        if missing:
            raise SessionError(f"{impl.name} does not implement {', '.join(missing)}")
        return list(dict.fromkeys(algorithms)), []
    offered = [a for a in REGISTRY if a in impl.algorithms]
    names = [a for a in offered if REGISTRY[a].family in DEFAULT_FAMILIES and REGISTRY[a].switches]
    return names, [a for a in offered if a not in names]
