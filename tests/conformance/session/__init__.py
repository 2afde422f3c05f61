"""The session's tests: the library API, certificates, the pytest plugin and suite (conformance/session/)."""
