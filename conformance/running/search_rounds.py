"""The Hypothesis rounds of a search (``run_round``): one Hypothesis run each,
seeded per round and shard (``search_keys.shard_seed``), drawing cases until the
budget is judged, a member fails (Hypothesis shrinks the case), the time cap is
spent or every case the strategy can draw has been tried; each draw is examined
by drawn_case.py. impl_search.py runs rounds until the search ends.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, cast

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Flaky
from hypothesis.statistics import collector as hypothesis_statistics

from ..core.case import Case
from ..core.execute import Member
from ..core.interrupts import checkpoint
from ..core.judge import Finding
from ..core.timecap import TimeCap, TimeUp
from .drawn_case import _MemberFailed, example
from .search_keys import shard_seed

if TYPE_CHECKING:
    from .impl_search import _Search

__all__ = ["EXHAUSTED", "MAX_ROUNDS", "PROBE_DRAWS", "run_round"]

#: search rounds at most: a round ends early on a failure, or draws repeats that are not examples
MAX_ROUNDS = 16
#: draws a search round after the first may make beyond its budget (it ends itself once the budget
#: is judged). A later round runs because draws were refused or repeated; asked only for the budget,
#: a mask search (128 distinct cases) ended a few short of 100 when one round drew only repeats
#: (a fresh clone's `make run`, 2026-12-05). Measured (seed 0, default budget): 100 distinct mask cases took 944
#: draws, about 5 ms each, most of them repeats
PROBE_DRAWS = 1000
#: Hypothesis's reason for ending a run whose every choice sequence has been tried
#: (``ExitReason.finished``, hypothesis 6.170; without a failure only an exhausted tree ends so)
EXHAUSTED = "nothing left to do"


class _Enough(BaseException):
    """A round has judged its budget: Hypothesis stops at once (a BaseException, as the time cap's
    ``TimeUp``: not a failure, nothing to shrink)."""


def _culprit(exc: BaseException) -> Optional[tuple[Member, Finding, Case]]:
    """The member failure inside a Hypothesis error (e.g. ``Flaky``), if there is one."""
    stack = [exc]
    while stack:
        e = stack.pop()
        if isinstance(e, _MemberFailed):
            return e.member, e.finding, e.case
        stack.extend(getattr(e, "exceptions", []) or [])
        if e.__cause__:
            stack.append(e.__cause__)
        if e.__context__:
            stack.append(e.__context__)
    return None


def run_round(search: "_Search", strategy: Any) -> bool:
    """One Hypothesis run; True: search on (another round, with the members left).

    The budget counts the examples the spec judged (``state["judged"]``: value sets examined,
    and cases refused by definition whose refusal was checked), not draws: a draw the spec
    refuses or cannot bound, or a repeat, leaves the budget as it was, and the search goes
    on with a fresh seed for the examples it lacks while rounds still find new cases (at most
    ``MAX_ROUNDS``). A round that ends because Hypothesis has tried every choice its strategy
    can make ("nothing left to do": its tree is exhausted) ends the search: every distinct
    case was examined (``exhausted``)."""
    state: dict[str, Any] = {"generated": 0, "repeated": 0, "judged": 0, "shrink": 0}
    # Checked before every draw and in the body, and by a watchdog while Hypothesis's own
    # code runs (its targeting phase can run long without drawing: timecap.py), which
    # also raises a held Ctrl-C there.
    timecap = TimeCap(lambda: _over(search, state))
    test = _hypothesis_test(search, strategy, timecap, state)
    stats: list[Mapping[str, Any]] = []
    try:
        try:
            # Hypothesis types its collector as holding None (its default); it takes a callback
            with cast(Any, hypothesis_statistics).with_value(stats.append), timecap.watching():
                test()
        except _Enough:
            return False  # the budget is spent, or every case judged
        if any(s.get("stopped-because") == EXHAUSTED for s in stats):
            search.exhausted = True
            return False
        # a round that judged nothing new (only repeats or refusals) ends the search: another
        # seed would mostly draw the same
        return bool(state["judged"] and search.budget > state["judged"] and search.round + 1 < MAX_ROUNDS)
    except TimeUp:
        search.result.time_capped[(search.entry.name, search.dtype)] = True
        return False
    except _MemberFailed as exc:
        search._member_failed(exc.member, exc.finding, exc.case, shrunk=True)
        return True
    except Flaky as exc:  # failed, then passed when replayed: nondeterminism
        return _flaky(search, exc)
    except Exception as exc:  # noqa: BLE001 - a harness problem must not end the run
        search._harness_error(f"{type(exc).__name__}: {exc}")
        return False
    finally:
        search.budget -= state["judged"] + state["shrink"]
        search.round += 1


def _over(search: "_Search", state: dict[str, Any]) -> bool:
    """Whether the time cap is spent. Never while shrinking a failure: the time cap must not
    lose a counterexample. The spec's references are shared by the searches of a task, and
    whichever implementation is searched first would pay for them: their time is not counted
    against an implementation's cap, up to the cap again (a search whose references
    dominate, a training loop's, takes at most twice its cap)."""
    return (search.deadline is not None and not state.get("failed") and state["generated"] + search.round > 0
            and time.monotonic() > search.deadline + min(search.runner._reference_seconds - search.references_before,
                                                       search.cap))


def _hypothesis_test(search: "_Search", strategy: Any, timecap: TimeCap, state: dict[str, Any]) -> Callable[[], None]:
    """This round's Hypothesis test. The first round asks Hypothesis for the budget's draws, as
    before the budget counted judged examples (the same seed draws the same cases). A later
    round exists because draws were refused or repeated, so it asks for ``PROBE_DRAWS`` more
    and ends itself (``_Enough``) once the budget is judged: a strategy with few distinct cases
    (a mask, a sinusoid table) is then drawn until Hypothesis has tried every one, rather than
    stopping a few short of its budget by chance."""
    draws = -(-search.budget // search.block) + (PROBE_DRAWS if search.round else 0)

    @settings(max_examples=draws, deadline=None, database=None,
              report_multiple_bugs=False, derandomize=False, print_blob=False,
              phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink),
              suppress_health_check=list(HealthCheck))
    @seed(shard_seed(search.runner.seed, search.round, search.runner.shard))
    @given(timecap.strategy(strategy))
    def test(case: Case) -> None:
        checkpoint()  # a held Ctrl-C stops the search here, in the test, not in Hypothesis's engine
        with timecap.checked():
            state["generated"] += 1
            try:
                example(search, case, state)
            except _MemberFailed:
                state["failed"] = True
                raise
            if not state.get("failed"):
                if search.space is not None and len(search.covered) == len(search.space):
                    search.exhausted = True  # every case the strategy can draw: judged
                if search.exhausted or state["judged"] >= search.budget:
                    raise _Enough()

    return test


def _flaky(search: "_Search", exc: Flaky) -> bool:
    """A failure that passed when Hypothesis replayed it: the member fails as nondeterministic
    (True: search on without it), or, when no member's failure is inside, the search errs."""
    culprit = _culprit(exc)
    if culprit is None:
        inner = [e for e in getattr(exc, "exceptions", ()) or () if e is not exc]
        cause = f" (first: {type(inner[0]).__name__}: {inner[0]})" if inner else ""
        search._harness_error(f"flaky search: {exc}{cause}")
        return False
    member, finding, case = culprit
    finding.message = "failed, then passed on an identical replay (nondeterministic): " + finding.message
    search._member_failed(member, finding, case, shrunk=False)
    return True
