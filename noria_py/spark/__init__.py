"""Spark integration: bulk load (``load.py``), the "noria" data source
(``datasource.py``), plan translation for Spark lineage recovery (``translate.py``).

PySpark is an optional dependency (``pip install 'noria-py[spark]'``) and needs Java 17+;
nothing here imports it until it is used.
"""
from .session import SparkUnavailableError, get_session, java_version

__all__ = ["SparkUnavailableError", "dataframe", "get_session", "java_version", "register"]


def register(spark) -> None:
    """Make ``df.write.format("noria")`` and ``spark.read.format("noria")`` available in
    ``spark`` (once per session). It turns on the session's Python data source filter
    pushdown (``spark.sql.python.filterPushdown.enabled``), by which a filter on a
    parameterized view's key columns is read by lookup: Spark refuses a reader that
    takes filters while it is off."""
    from .datasource import NoriaDataSource
    spark.dataSource.register(NoriaDataSource)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def dataframe(spark, **options):
    """A view or a table as a Spark DataFrame, its options checked here first
    (``read.dataframe``: ``view``/``table``, ``data_dir``/``server``, ``key``)."""
    from .read import dataframe as read_dataframe
    return read_dataframe(spark, **options)
