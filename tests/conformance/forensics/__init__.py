"""The forensics' tests: diagnosis, distinct failures, first divergence, identify (conformance/forensics/)."""
