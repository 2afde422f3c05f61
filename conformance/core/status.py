"""A cell's status, one home for its five values: the runner writes them, and the verdict, the
certificates, the reports and the benches read them back from plain data (JSON) and compare."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Status"]


class Status(StrEnum):
    """A cell's status. A ``StrEnum``: each member is its string (``Status.PASS == "pass"``), so the
    JSON report, the JUnit XML, the certificates and the worker's plain values write the same text
    as when the status was a bare string, and readers of plain data compare it with that text."""

    #: every example the search judged passed (or the search has not run yet: planned cells start so)
    PASS = "pass"
    #: a check failed on an example (the cell's ``failure`` says which)
    FAIL = "fail"
    #: the implementation does not declare the algorithm at this dtype
    NOT_IMPLEMENTED = "not implemented"
    #: the search judged no example (every draw refused or out of range, left out, or not run)
    NO_EXAMPLES = "no examples"
    #: the harness or the plugin's loading failed: nothing can be said of the implementation
    ERROR = "error"
