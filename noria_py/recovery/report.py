from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RecoveryReport:
    """What one recovery did and how long it took."""
    node: str
    strategy: str
    seconds: float
    replayed_messages: int = 0
    purged: list[str] = field(default_factory=list)
    rows: int = 0            # rows recomputed or replayed
    automatic: bool = False
    #: the time of the checkpoint a stateful node came back from (None: stateless, or
    #: rebuilt from its parents' state)
    checkpoint: int | None = None
    #: the nodes set back to an earlier state besides the failed one (the coordinated
    #: regime: every node, to the epoch ``checkpoint``; None there: rebuilt)
    rolled_back: list[str] = field(default_factory=list)
    #: how each node this recovery brought back got its state: "checkpoint" (its own,
    #: plus its parents' logs since), "rebuilt" (from its parents' state), "replayed"
    #: (stateless: its parents' logs alone), "history" (a base, from its write
    #: history), "lineage" (purged and recomputed from the base tables), "standby"
    #: (the causal regime in a cluster: its checkpoint from its standby on the worker
    #: it was moved to, plus its parents' logs since)
    paths: dict[str, str] = field(default_factory=dict)
    #: why tree clocks refused, when ``db.recover()`` fell back on lineage for this node
    fallback: str | None = None
