"""Tests of the tools in ``noria_tools``: the benchmark harnesses and the sqllogictest runner."""
