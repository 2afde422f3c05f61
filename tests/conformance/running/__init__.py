"""The running room's tests: searches, isolation, workers and shards, replay (conformance/running/)."""
