"""Sessions: ``run``, ``certify``, ``reproduce`` and ``identify`` as library calls (``commands``;
``phases`` is a run's phases, ``identify_command`` the identification over a plugin's
algorithms), their JSON reports (``report``) and certificates (``certificate``). The top room of
the harness: it may import every room below it (docs/development.md, "Rooms of the harness")::

    from ftspec.conformance.session import Settings, certify, identify, run
"""

from .commands import (
    EXTENSION_SEED,
    Certificate,
    Identification,
    NothingTested,
    Reproduction,
    RunResult,
    SessionError,
    Settings,
    capped_jobs,
    certify,
    identify,
    reproduce,
    run,
)

__all__ = ["EXTENSION_SEED", "Certificate", "Identification", "NothingTested", "Reproduction", "RunResult",
           "SessionError", "Settings", "capped_jobs", "certify", "identify", "reproduce", "run"]
