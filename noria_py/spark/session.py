"""Starting Spark: the Java check, and one shared SparkSession per process.

PySpark 4 runs on a Java 17+ JVM. Without one, Spark's own failure is a long Java
stack trace or a hang, so we look for Java first and say how to install it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from ..errors import OperationalError

INSTALL_HINT = ("install Java 17 or newer, e.g. `sudo apt-get install openjdk-17-jre-headless` "
                "(Debian/Ubuntu) or `brew install openjdk@17` (macOS), or point JAVA_HOME at one")

# Settings every noria-py Spark session gets: Arrow transfers, no web UI, SQL semantics
# without ANSI errors (division by zero is NULL, as in the engine).
DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
}


class SparkUnavailableError(OperationalError):
    """PySpark or Java is missing or unusable."""


def java_version() -> int:
    """The major version of the Java that Spark will use; raises if there is none."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={home!r} has no bin/java" if home else "no `java` on PATH"
        raise SparkUnavailableError(f"Spark needs Java 17 or newer, and there is none ({where}): "
                                    f"{INSTALL_HINT}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkUnavailableError(f"cannot run {java} -version ({exc}): {INSTALL_HINT}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        raise SparkUnavailableError(f"cannot tell which Java {java} is: {INSTALL_HINT}")
    major = int(m.group(1))
    if major == 1 and m.group(2):           # "1.8.0" style
        major = int(m.group(2))
    if major < 17:
        raise SparkUnavailableError(f"Spark needs Java 17 or newer, found Java {major} at {java}: "
                                    f"{INSTALL_HINT}")
    return major


def require_pyspark():
    """PySpark's ``SparkSession``, or a ``SparkUnavailableError`` that says how to
    install it (every module here that imports PySpark at its top calls this first)."""
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailableError(
            "PySpark is not installed: pip install 'noria-py[spark]' (or pip install 'pyspark>=4.0')"
        ) from None
    return SparkSession


def get_session(master: str | None = None, conf: dict[str, str] | None = None):
    """The active SparkSession, or a new one on ``master`` (default ``local[*]``).

    An already-running session is reused as it is (tests start one per session; a
    user may bring their own), whatever ``master`` says.
    """
    SparkSession = require_pyspark()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    java_version()
    # Python workers (data source writers) must run this interpreter, which has noria_py
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or "local[*]").appName("noria-py")
    for k, v in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not come up
        raise SparkUnavailableError(f"Spark did not start ({str(exc).splitlines()[0]}); "
                                    f"check Java: {INSTALL_HINT}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark
