"""``ftspec fixtures regenerate`` killed at any moment leaves the old or the new complete set.

The writer (``fixtures.generate.write_atomic``, with the directory swap of
``fixtures/swap.py``) runs in a subprocess with an audit hook that counts
every filesystem change it makes (opening a file for writing, mkdir, rename,
remove, chmod, a ctypes call such as renameat2) and sends itself SIGKILL
just before the N-th, for every N from the first change to the last. After
each kill the target directory must hold exactly the old set or exactly the
new one; a later run must still succeed and leave no debris beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="needs POSIX signals")

WRITER = r'''
import json, os, signal, sys
from pathlib import Path
from types import SimpleNamespace

import ftspec.fixtures.generate as g

target, kill_at = Path(sys.argv[1]), int(sys.argv[2])
# The manifest's content is not what is tested here, only that the set moves as a whole.
g.manifest_bytes = lambda records, notes: json.dumps(sorted(r["id"] for r in records)).encode()
items = [SimpleNamespace(filename=f"c{i}.bin", data=f"new {i}".encode(), record={"id": f"c{i}"},
                         spec=SimpleNamespace(id=f"c{i}"), disagreements=[]) for i in range(3)]
CHANGES = {"os.rename", "os.remove", "os.rmdir", "shutil.rmtree", "os.mkdir", "os.chmod", "tempfile.mkdtemp",
           "ctypes.call_function", "os.symlink", "os.link", "os.truncate"}
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC
count = 0

def hook(event, args):
    global count
    if event == "open":
        mode, flags = args[1], args[2]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                 (mode is None and isinstance(flags, int) and flags & WRITES)
        if not writes:
            return
    elif event not in CHANGES:
        return
    count += 1
    if count == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

sys.addaudithook(hook)
g.write_atomic(target, items)
print(count)
'''

OLD = {"c0.bin": b"old 0", "c1.bin": b"old 1", "c2.bin": b"old 2", "c3.bin": b"old 3",
       "manifest.json": b'["c0", "c1", "c2", "c3"]'}
NEW = {"c0.bin": b"new 0", "c1.bin": b"new 1", "c2.bin": b"new 2", "manifest.json": b'["c0", "c1", "c2"]'}


def _contents(directory: Path) -> dict[str, bytes] | None:
    if not directory.is_dir():
        return None
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def _write(script: Path, target: Path, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), str(target), str(kill_at)], capture_output=True, text=True,
                          timeout=60)


def test_a_kill_at_any_step_leaves_the_old_or_the_new_complete_set(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    root = tmp_path / "pkg"
    target = root / "data"
    target.mkdir(parents=True)
    for name, data in OLD.items():
        (target / name).write_bytes(data)

    # A dry run counts the changes an uninterrupted regeneration makes.
    probe_root = tmp_path / "probe"
    (probe_root / "data").mkdir(parents=True)
    for name, data in OLD.items():
        (probe_root / "data" / name).write_bytes(data)
    done = _write(script, probe_root / "data", 0)
    assert done.returncode == 0, done.stderr
    steps = int(done.stdout.strip())
    assert steps >= len(NEW) + 2  # files, manifest and at least the swap
    assert _contents(probe_root / "data") == NEW

    seen = set()
    for n in range(1, steps + 1):
        killed = _write(script, target, n)
        assert killed.returncode == -9, (n, killed.returncode, killed.stderr)
        state = _contents(target)
        assert state in (OLD, NEW), f"killed before change {n} of {steps}: {target} holds {state}"
        seen.add("new" if state == NEW else "old")
        if state == NEW:  # put the old set back for the next kill point
            for p in target.iterdir():
                p.unlink()
            for name, data in OLD.items():
                (target / name).write_bytes(data)
    assert seen == {"old", "new"}  # the kills fell on both sides of the swap

    final = _write(script, target, 0)
    assert final.returncode == 0, final.stderr
    assert _contents(target) == NEW
    assert [p.name for p in root.iterdir()] == ["data"]  # the killed runs' debris is gone
