"""The core's tests (conformance/core/): a case, its values and strategies, the spec's reference
and tolerances, the judges."""
