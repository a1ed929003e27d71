"""The worked example of docs/treeclock.md: ``python -m treeclock.example``.

It runs a few messages through a diamond graph with the Numba version,
checks every step against the reference version, and prints Markdown: each
message, the diff it makes and the receiver's clock after it, then what
recovery of a failed node computes, then the sizes. The document includes
this output verbatim (a test keeps them in sync), so its numbers are real.
"""

from __future__ import annotations

import numpy as np

from . import ReferenceTreeClocks, TreeClocks, clock_nbytes, diff_nbytes

A, B, C, D = 1, 2, 3, 4
NAMES = {A: "A", B: "B", C: "C", D: "D"}
DIAMOND = {A: (), B: (A,), C: (A,), D: (B, C)}
DEPTH = 2

GRAPH_PICTURE = """\
        A          A is a base table (a source): it receives client writes
       / \\
      B   C        B and C each read from A
       \\ /
        D          D reads from both: two paths from A to D"""


def tree(paths: dict[tuple[int, ...], int], names: dict[int, str] = NAMES) -> list[str]:
    """A clock or diff ``{path: time}`` as an indented tree, root first."""
    order = sorted(paths, key=lambda p: [list(paths).index(p[: i + 1]) for i in range(len(p))])
    lines = []
    for path in order:
        label = f"{names[path[-1]]} = {paths[path]}"
        if len(path) == 1:
            lines.append(label)
            continue
        prefix = ""
        for i in range(2, len(path)):
            ancestor = path[:i]
            siblings = [p for p in order if len(p) == i and p[:-1] == ancestor[:-1]]
            prefix += "   " if ancestor == siblings[-1] else "│  "
        siblings = [p for p in order if len(p) == len(path) and p[:-1] == path[:-1]]
        lines.append(prefix + ("└─ " if path == siblings[-1] else "├─ ") + label)
    return lines


def _flat(arr: np.ndarray) -> str:
    return "[" + ", ".join(str(int(v)) for v in arr) + "]"


def render() -> str:
    fast = TreeClocks(DIAMOND, DEPTH)
    ref = ReferenceTreeClocks(DIAMOND, DEPTH)
    clocks = {n: fast.zero(n) for n in DIAMOND}
    rclocks = {n: ref.zero(n) for n in DIAMOND}
    logs = {n: fast.new_log(n) for n in DIAMOND}
    last = {n: fast.zero(n) for n in DIAMOND}
    rlast = {n: ref.zero(n) for n in DIAMOND}
    out: list[str] = []
    say = out.append

    say("```text")
    say(GRAPH_PICTURE)
    say("```")
    say("")
    say(f"Depth d = {DEPTH}. The clock of D has these entries, in this order (its layout):")
    say("")
    for i, path in enumerate(fast.paths(D)):
        say(f"{i}. `({', '.join(NAMES[n] for n in path)})`")
    say("")

    step = 0
    inbox: dict[tuple[int, int], list[tuple[np.ndarray, dict[tuple[int, ...], int]]]]
    inbox = {(p, n): [] for n in DIAMOND for p in DIAMOND[n]}  # per-edge FIFO of carried diffs

    def send(node: int, children: tuple[int, ...]) -> None:
        for child in children:
            inbox[(node, child)].append((last[node].copy(), dict(rlast[node])))

    def receive(node: int, parent: int | None, note: str, sends_to: tuple[int, ...] = ()) -> None:
        nonlocal step
        step += 1
        carried, rcarried = (None, None) if parent is None else inbox[(parent, node)].pop(0)
        diff = fast.receive(node, parent, carried, clocks[node], logs[node])
        rdiff = ref.receive(node, parent, rcarried, rclocks[node])
        assert fast.to_paths(node, diff) == rdiff, "numba and reference disagree"
        assert fast.to_paths(node, clocks[node]) == rclocks[node], "numba and reference disagree"
        last[node], rlast[node] = diff, rdiff
        source = "a client write" if parent is None else f"a message from {NAMES[parent]}"
        say(f"**{step}. {NAMES[node]} receives {source}.** {note}")
        say("")
        say("```text")
        d_lines = tree(fast.to_paths(node, diff)) + ["", "as array " + _flat(diff)]
        c_lines = tree(fast.to_paths(node, clocks[node])) + ["", "as array " + _flat(clocks[node])]
        width = max(len(line) for line in d_lines) + 6
        say("diff".ljust(width) + f"{NAMES[node]}'s clock after")
        for left, right in zip(d_lines, c_lines):
            say((left.ljust(width) + right).rstrip())
        say("```")
        say("")
        send(node, sends_to)

    receive(A, None, "A's time becomes 1. A sends the row to B and C; each message carries this diff.", (B, C))
    receive(B, A, "B's diff is its new time, with the diff the message carried hung under A. "
            "B sends a row to D.", (D,))
    receive(A, None, "A's time becomes 2; it sends this row to B and C too.", (B, C))
    receive(C, A, "C gets A's first message, which carries A-time 1 although A is at 2 by now. "
            "C's filter drops the row: C sends nothing.")
    receive(D, B, "D's diff nests B's diff, which nests A's.")
    receive(C, A, "C gets A's second message and this time sends a row to D.", (D,))
    receive(D, C, "D's clock now holds both paths back to A, with different A-times. "
            "The diff has zeros off its one path; the merge keeps what D knew.")
    receive(B, A, "B gets A's second message; its filter drops the row, so D never hears of it.")

    say("**B fails.** D is B's only child. Recovery reads D's clock and diff log:")
    say("")
    t_min = fast.min_time(B, {D: clocks[D]})
    rt_min = ref.min_time(B, {D: rclocks[D]})
    t_star = fast.t_star(B, {D: logs[D]}, t_min)
    rlog = [fast.to_paths(D, row) for row in logs[D]]
    assert t_min == rt_min and fast.to_paths(B, t_star) == ref.t_star(B, {D: rlog}, rt_min)
    say("```text")
    say(f"t_min(B) = min over B's children of their (child, B) entry = D's (D, B) = {t_min}")
    say("T* = the (D, B) subtrees of D's diffs with (D, B) <= t_min, merged, root set to t_min:")
    for line in tree(fast.to_paths(B, t_star)):
        say("    " + line)
    a_time = fast.time_at(B, t_star, (B, A))
    say(f"B' restarts at time {t_min}; A resends to B' from A-time {a_time} + 1 = {a_time + 1}.")
    say(f"B' sends D only output of B-time > {fast.time_at(D, clocks[D], (D, B))} (D's (D, B) entry).")
    say("```")
    say("")
    say(
        f"B really had reached time {int(clocks[B][0])}: it had processed A's second message, "
        "but nobody downstream saw a result, so T* may forget it. Replay from A regenerates "
        "it, and the filter drops its output again."
    )
    say("")

    say("Sizes in this graph at depth 2 (bytes as encoded, header and CRC included):")
    say("")
    say("| node | parents | clock entries | clock bytes | diff bytes |")
    say("| --- | --- | ---: | ---: | ---: |")
    for n in DIAMOND:
        ps = ", ".join(NAMES[p] for p in DIAMOND[n]) or "-"
        lay = fast.layout(n)
        assert len(fast.encode(n, clocks[n])) == clock_nbytes(lay)
        assert len(fast.encode_diff(n, last[n])) == diff_nbytes(DEPTH)
        say(f"| {NAMES[n]} | {ps} | {lay.size} | {clock_nbytes(lay)} | {diff_nbytes(DEPTH)} |")
    return "\n".join(out) + "\n"


def main() -> None:
    print(render(), end="")


if __name__ == "__main__":
    main()
