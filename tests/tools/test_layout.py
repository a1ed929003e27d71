"""The engine stands alone: importing every module of ``noria_py`` imports no tool."""
from __future__ import annotations

import subprocess
import sys

CHECK = """
import pkgutil, sys, noria_py
for m in pkgutil.walk_packages(noria_py.__path__, "noria_py."):
    __import__(m.name)
tools = sorted(m for m in sys.modules if m.split(".")[0] == "noria_tools")
assert not tools, tools
print(len([m for m in sys.modules if m.startswith("noria_py")]))
"""


def test_the_engine_imports_no_tool():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 40           # it did walk the engine's modules
