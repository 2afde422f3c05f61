"""The conformance suite as pytest tests: ``pytest --pyargs ftspec.conformance.suite``."""
