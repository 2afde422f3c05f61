"""ftspec.tools: the ``ftspec`` command (run, certify, list, fixtures, bench)."""
