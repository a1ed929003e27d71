"""Fault-tolerance regimes (issue 19): how a database survives a failed node, chosen
per database with ``connect(regime=NAME)`` or ``noria-py serve --regime NAME``.

A regime fixes both what normal operation pays (clocks on messages, checkpoints,
barriers) and what ``db.recover(node)`` does with no strategy named. The names are
those of the issue (docs/regimes.md has the table); a name not built (none is left)
or unknown is refused with a ``RegimeError`` that says so, never quietly run as another
regime. A dict is falkirk's per-node choice of policies (``runtime/falkirk.py``).

Invariant: ``BUILT`` and ``NOT_BUILT`` are disjoint and their union is every name the
contract lists; ``STRATEGIES[r]`` are the recovery strategies a database in regime
``r`` accepts, the first being what ``recover`` uses by default.
"""
from __future__ import annotations

import json
from typing import Any

from .errors import ArgumentError, RegimeError

__all__ = ["BUILT", "EMBEDDED_ONLY", "NOT_BUILT", "PARTIAL_IN_CLUSTER", "STRATEGIES", "check",
           "check_partial", "from_text", "policies"]

#: regime -> what it does, in a line (``noria-py bench regimes`` prints these)
BUILT = {
    "treeclock": "tree clocks on messages, local checkpoints; the failed node alone recovers",
    "lineage": "nothing extra in normal operation; purge downstream and recompute",
    "coordinated": "aligned barrier checkpoints; every node rolls back, the bases replay",
    "uncoordinated": "local checkpoints, dependencies and channel logs; roll back to the recovery line",
    "cic": "local and forced checkpoints by piggybacked indices; roll back to the index line",
    "causal": "determinants piggybacked and kept downstream, in-flight logs, local "
              "checkpoints; the failed node alone replays",
    "falkirk": "a policy per node (eager, lazy, batch, ephemeral); the rollback frontier "
               "as a fixed point, low-watermark garbage collection",
}
NOT_BUILT: tuple[str, ...] = ()

#: the strategies ``db.recover(node, strategy=...)`` accepts in each regime; the first
#: is the regime's own (``strategy=None``)
STRATEGIES = {
    "treeclock": ("treeclock", "lineage", "spark"),
    "lineage": ("lineage", "spark"),
    "coordinated": ("coordinated", "lineage"),
    "uncoordinated": ("uncoordinated", "lineage"),
    "cic": ("cic", "lineage"),
    "causal": ("causal", "lineage"),
    "falkirk": ("falkirk", "lineage"),
}

#: the regimes the cluster runtime does not offer yet (none: every one is offered)
EMBEDDED_ONLY: tuple[str, ...] = ()

#: the regimes a cluster serves partial state in (``serve --partial``); the embedded
#: engine takes ``connect(partial=True)`` in every regime (docs/partial.md, rule 6)
PARTIAL_IN_CLUSTER: tuple[str, ...] = ("treeclock",)


def check(regime: Any, *, cluster: bool = False) -> str:
    """``regime`` if it is built (for a cluster: offered by the cluster runtime too);
    a dict is falkirk's per-node choice (``policies``), checked; else a RegimeError
    naming it."""
    if isinstance(regime, dict):
        policies(regime)
        regime = "falkirk"
    if not isinstance(regime, str):
        raise RegimeError(f"regime must be a name ({', '.join(BUILT)}) or falkirk's "
                          f"per-node dict, got {regime!r}")
    if regime in NOT_BUILT:
        raise RegimeError(f"regime {regime!r} is not built yet; built: {', '.join(BUILT)}")
    if regime not in BUILT:
        raise RegimeError(f"unknown regime {regime!r}; built: {', '.join(BUILT)} "
                          f"(not built yet: {', '.join(NOT_BUILT)})")
    if cluster and regime in EMBEDDED_ONLY:
        raise RegimeError(f"regime {regime!r} is built for the embedded engine only, not "
                          "for a cluster yet; use "
                          f"{', '.join(r for r in BUILT if r not in EMBEDDED_ONLY)} "
                          "with noria-py serve")
    return regime


def check_partial(regime: str) -> None:
    """An ArgumentError unless a cluster serves partial state in ``regime``
    (``PARTIAL_IN_CLUSTER``), naming why not."""
    if regime not in PARTIAL_IN_CLUSTER:
        raise ArgumentError(
            f"serve --partial is offered with --regime treeclock only, not {regime!r}: "
            f"a cluster's {regime} recovery sets node shards back or replays them on the "
            "workers without emptying the partial nodes' paths across workers "
            "(runtime/cluster/partial.py follows tree-clock and lineage recovery only); "
            f"the embedded engine takes connect(regime={regime!r}, partial=True)")


def check_causal(regime: str, determinant_depth: Any, standby: Any, how: str) -> None:
    """The causal regime's settings (``connect``'s ``determinant_depth`` and ``standby``,
    ``serve``'s ``--determinant-depth`` and ``--standbys``) fit ``regime``, else an
    ArgumentError naming the setting; ``how`` says how to ask for the causal regime
    there."""
    if regime != "causal" and (determinant_depth is not None or standby):
        raise ArgumentError(f"determinant_depth and standby are settings of the causal "
                            f"regime; {how}")
    if determinant_depth is not None and (type(determinant_depth) is not int
                                          or determinant_depth < 1):
        raise ArgumentError(f"determinant_depth must be a number of edges (an int, 1 or "
                            f"more) or None for all, got {determinant_depth!r}")
    if type(standby) is not bool:
        raise ArgumentError(f"standby must be True or False, got {standby!r}")


def policies(regime: Any) -> dict[str, str]:
    """Falkirk's per-node choice: ``{}`` for ``"falkirk"`` (each node's own default),
    else the dict (``{"default": POLICY, NODE_OR_VIEW: POLICY, ...}``) checked, its
    aliases resolved. A RegimeError names an unknown policy, or a regime's name given
    as a node's policy (per-node choices are falkirk's alone)."""
    from .runtime.falkirk import ALIASES, POLICIES, normalize
    if not isinstance(regime, dict):
        return {}
    for name, policy in regime.items():
        if isinstance(policy, str) and policy in BUILT:
            raise RegimeError(f"{policy!r} (for {name!r}) is a regime of the whole "
                              f"database, not a per-node policy: a dict chooses falkirk's "
                              f"policies, {', '.join([*POLICIES, *ALIASES])}; for "
                              f"{policy!r}, connect(regime={policy!r})")
    return normalize(regime)


def from_text(text: str) -> str | dict[str, str]:
    """A regime as a command line gives it (``noria-py serve --regime``): a name, or
    falkirk's per-node choice as a JSON object (``'{"default": "lazy", "votes":
    "eager"}'``); a RegimeError for text that starts as an object and is none."""
    if not text.lstrip().startswith("{"):
        return text
    try:
        choice = json.loads(text)
    except ValueError as e:
        raise RegimeError(f"falkirk's per-node regime must be a JSON object of names to "
                          f"policies, got {text!r} ({e})") from None
    if not isinstance(choice, dict):
        raise RegimeError(f"falkirk's per-node regime must be a JSON object, got {text!r}")
    return choice
