"""``ftspec bench``: the instrument that measures ftspec's own power and speed.

- ``power``: the bug zoo (tools/zoo) through the harness and two baselines;
- ``falsefail``: the correct bundled implementations at the thorough profile;
- ``speed``: examples per second, where the time goes, the spec's cost
  growth, pytest-xdist scaling;
- ``report``: docs/benchmarks.md from the collected results.
"""
