"""Spark integration: bulk load (``load.py``), the "noria" data source
(``datasource.py``), plan translation for Spark lineage recovery (``translate.py``).

PySpark is an optional dependency (``pip install 'noria-py[spark]'``) and needs Java 17+;
nothing here imports it until it is used.
"""
from .session import SparkUnavailableError, get_session, java_version

__all__ = ["SparkUnavailableError", "get_session", "java_version", "register"]


def register(spark) -> None:
    """Make ``df.write.format("noria")`` available in ``spark`` (once per session)."""
    from .datasource import NoriaDataSource
    spark.dataSource.register(NoriaDataSource)
