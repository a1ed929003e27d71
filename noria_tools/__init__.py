"""noria-py's tools: everything around the engine that is not the engine.

The ``noria-py`` command (``cli``), the vote demo (``demo``), the benchmark harnesses
(``bench``, ``overhead``, ``memory``, ``loadbench``, ``clusterbench``, and
``peers_pathway`` for the peer engine), the vote workload they share (``workloads``) and
the sqllogictest conformance runner (``logictest``). They use the engine through its
public API (``noria_py``); the engine never imports this package.
"""
