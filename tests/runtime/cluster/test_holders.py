"""Checkpoints at a holder worker (``noria_py/runtime/cluster/holders.py``): the frames
a worker's ``RemoteStore`` sends its holder, through the codec, into the holder's
store per origin (``Held``), and the rules that keep a holder's chain of a node one
the node's own: a delta only on what the holder holds, every node whole to a new
holder. The SIGKILL tests are in test_cluster.py."""
from __future__ import annotations

import numpy as np

from noria_py.batch import Batch
from noria_py.runtime.cluster import wire
from noria_py.runtime.cluster.holders import Held, RemoteStore
from noria_py.storage.codec import packb, unpackb


def _over_wire(frame):
    return unpackb(packb(frame))


class _Links:
    """The peer links (``channels.Links.send``): what went to whom, in order."""

    def __init__(self) -> None:
        self.out: list[tuple[str, list]] = []

    def send(self, peer: str, frame) -> None:
        self.out.append((peer, frame))


def _counts(ck) -> dict:
    (port,) = ck.inputs
    return dict(port)


def _deliver(links: _Links, held: dict[str, Held], origin: str) -> None:
    for peer, frame in links.out:
        held.setdefault(peer, Held()).frame(origin, _over_wire(frame))
    links.out.clear()


def test_a_holder_keeps_a_workers_checkpoints_and_a_new_one_gets_each_node_whole():
    links, held = _Links(), {}
    store = RemoteStore(lambda f: None, links)       # (the controller is sent nothing)
    clock = np.array([3, 1, 0], dtype=np.int64)
    store.put("n5", 2, {"n3": 2}, "input", [(0, Batch.inserts([(1,), (2,)]))], False, 0)
    assert not links.out and not store.has("n5")     # no holder yet: nowhere, not held
    store.set_holder("w2")
    store.put("n5", 2, {"n3": 2}, "input", [(0, Batch.inserts([(1,), (2,)]))], True, 0)
    last_seen = {"n3": 3}                           # (the domain's own, moving on)
    store.put("n5", 3, last_seen, "input", [(0, Batch.inserts([(3,)]))], False, 0,
              clock=clock)
    last_seen["n3"] = 4                             # (before the link is flushed)
    _deliver(links, held, "w1")
    ck = held["w2"].stores["w1"].latest("n5", 3)
    assert ck is not None and _counts(ck) == {(1,): 1, (2,): 1, (3,): 1}
    assert ck.parent_times == {"n3": 3}
    got = wire.decode_checkpoint(_over_wire(held["w2"].latest("w1", "n5", 3)))
    assert got.time == 3 and got.clock is not None and got.clock.tolist() == [3, 1, 0]
    assert held["w2"].latest("w1", "n5", 1) is None and held["w2"].latest("w9", "n5", 3) is None

    # the holder lost: a new one holds nothing, so the next checkpoint is whole
    store.set_holder("w3")
    assert not store.has("n5")
    store.put("n5", 4, {"n3": 4}, "input", [(0, Batch.inserts([(1,), (2,), (3,), (4,)]))],
              True, 0)
    _deliver(links, held, "w1")
    assert _counts(held["w3"].stores["w1"].latest("n5", 4)) == {(r,): 1 for r in range(1, 5)}


def test_a_delta_of_what_the_holder_does_not_hold_is_refused_never_a_wrong_chain():
    """A node restored from another holder's checkpoint (``keep_upto``) is not held
    here: nothing is sent, and its next checkpoint is whole; a delta that comes all the
    same (never sent so) is dropped; ``ck_reset`` forgets an earlier turn."""
    links, held = _Links(), {}
    store = RemoteStore(lambda f: None, links)
    store.set_holder("w2")
    store.keep_upto("n7", 9)
    assert links.out == [("w2", ["ck_reset"])] and not store.has("n7")
    _deliver(links, held, "w1")
    held["w2"].frame("w1", _over_wire(["ck", "n7", 10, {"n3": 4}, "input",
                                       wire.encode_delta("input", [(0, Batch.inserts([(8,)]))]),
                                       False, 0, None]))
    assert held["w2"].latest("w1", "n7", 10) is None
    # (a domain's next checkpoint is whole: ``Domain.checkpoint``'s full, not held)
    store.put("n7", 10, {"n3": 4}, "input", [(0, Batch.inserts([(8,)]))],
              not store.has("n7"), 0)
    _deliver(links, held, "w1")
    assert held["w2"].latest("w1", "n7", 10) is not None
    store.drop("n7")
    _deliver(links, held, "w1")
    assert held["w2"].latest("w1", "n7", 10) is None
    store.put("n7", 11, {"n3": 5}, "input", [(0, Batch.inserts([(8,)]))], True, 0)
    store.set_holder("w2")                          # (named again: starts afresh)
    _deliver(links, held, "w1")
    assert held["w2"].latest("w1", "n7", 11) is None


def test_a_recovery_asks_the_holder_named_when_the_nodes_worker_was_lost():
    """``ClusterRuntime.checkpoint``: the holder recorded at the loss (the node is on
    its spare by then), never the spare's; that holder lost too: None (a rebuild)."""
    import threading
    import types

    from noria_py.runtime.cluster.controller import ClusterRuntime

    class _W:
        def __init__(self, name: str) -> None:
            self.name, self.alive, self.pid = name, True, 0
            self.put = lambda frame: None

    asked: list = []
    rt = ClusterRuntime.__new__(ClusterRuntime)
    rt.lock, rt.to_holders = threading.RLock(), True
    w2, w3 = _W("w2"), _W("w3")
    rt.workers = {"w2": w2, "w3": w3}
    rt.placement = {"n5": "w3"}                     # (moved to the spare)
    rt.holders = {"w3": None, "w2": "w3"}
    rt.ck_at = {"n5": ("w2", "w1")}
    held = Held()
    held.stores["w1"] = types.SimpleNamespace(latest=lambda n, t: None)

    def ask(w, method, *args):
        asked.append((w.name, method, *args))
        return None
    rt.ask = ask
    assert rt.checkpoint("n5", 7) is None
    assert asked == [("w2", "ck_latest", "w1", "n5", 7)]
    w2.alive = False
    assert rt.checkpoint("n5", 7) is None and len(asked) == 1
