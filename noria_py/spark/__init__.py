"""Spark integration: bulk load (``load.py``), the "noria" data source
(``datasource.py``), plan translation for Spark lineage recovery (``translate.py``).

PySpark is an optional dependency (``pip install 'noria-py[spark]'``) and needs Java 17+;
nothing here imports it until it is used.
"""
from .session import SparkUnavailableError, get_session, java_version

__all__ = ["SparkUnavailableError", "check_worker_python", "dataframe", "get_session",
           "java_version", "register"]


def register(spark) -> None:
    """Make ``df.write.format("noria")`` and ``spark.read.format("noria")`` available in
    ``spark`` (once per session). It turns on the session's Python data source filter
    pushdown (``spark.sql.python.filterPushdown.enabled``), by which a filter on a
    parameterized view's key columns is read by lookup: Spark refuses a reader that
    takes filters while it is off."""
    from .datasource import NoriaDataSource
    check_worker_python(spark)
    spark.dataSource.register(NoriaDataSource)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def check_worker_python(spark) -> None:
    """On a local master, the Python that Spark starts its workers with must import
    noria_py (a session started outside the project's virtual environment uses the
    system's, and every noria read or write would fail in the workers with
    ``ModuleNotFoundError``): say so here, with the one line that fixes it."""
    import subprocess
    import sys

    context = spark.sparkContext
    if not str(context.master).startswith("local"):
        return                      # (workers elsewhere: their Python is theirs to set up)
    python = getattr(context, "pythonExec", None) or sys.executable
    if python == sys.executable:
        return
    found = subprocess.run([python, "-c", "import noria_py"], capture_output=True)
    if found.returncode != 0:
        raise SparkUnavailableError(
            f"Spark starts its Python workers with {python}, which cannot import noria_py; "
            f"set PYSPARK_PYTHON to {sys.executable} before the session starts: "
            f"os.environ[\"PYSPARK_PYTHON\"] = sys.executable in the script (or export "
            f"PYSPARK_PYTHON={sys.executable} in the shell); the session's "
            f"spark.pyspark.python setting does not reach a data source's workers")


def dataframe(spark, **options):
    """A view or a table as a Spark DataFrame, its options checked here first
    (``read.dataframe``: ``view``/``table``, ``data_dir``/``server``, ``key``)."""
    from .read import dataframe as read_dataframe
    return read_dataframe(spark, **options)
