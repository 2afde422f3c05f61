"""Self-tests of the executable spec: each test states a theorem about the mathematics."""
