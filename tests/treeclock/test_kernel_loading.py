"""The compaction kernel's machine code is loaded when a process builds its first clocks,
for the one signature compaction calls it with: otherwise the 3-10 ms of loading it
lands on the write that first fills a diff log (docs/benchmarks.md, "The rare
expensive inserts: the first compaction's kernel load")."""
import subprocess
import sys

SCRIPT = """
import treeclock.kernels as K
from treeclock import TreeClocks, receive_path
tc = TreeClocks({1: (), 2: (), 3: (1, 2)}, 2)
loaded = list(K.compact.signatures)
flat = []
for t in range(1, 5):
    p = 1 + t % 2
    flat.extend(receive_path(tc.path_edge(3, p), receive_path(tc.path_edge(p, None), None, t), t))
log = tc.new_log(3)
tc.apply_paths(3, flat, tc.zero(3), log)
tc.compact(3, log, tc.zero(3), {1: 2, 2: 1})
print(len(loaded), loaded == list(K.compact.signatures))
"""


def test_compact_loaded_with_the_clocks_for_the_signature_it_is_called_with():
    # a fresh process: in this one another test may have called compact already
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["1", "True"]
