"""Recovering failed nodes: lineage rebuild now; tree clocks and Spark to come."""
from .report import RecoveryReport

__all__ = ["RecoveryReport"]
