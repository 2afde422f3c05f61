"""Sessions: ``run``, ``certify`` and ``reproduce`` as library calls (``commands``), their JSON
reports (``report``) and certificates (``certificate``). The top room of the harness: it may import
every room below it (docs/development.md, "Rooms of the harness")::

    from ftspec.conformance.session import Settings, certify, run
"""

from .commands import (
    EXTENSION_SEED,
    Certificate,
    NothingTested,
    Reproduction,
    RunResult,
    SessionError,
    Settings,
    capped_jobs,
    certify,
    reproduce,
    run,
)

__all__ = ["EXTENSION_SEED", "Certificate", "NothingTested", "Reproduction", "RunResult", "SessionError",
           "Settings", "capped_jobs", "certify", "reproduce", "run"]
