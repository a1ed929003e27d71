"""Turns logical plans into dataflow nodes: operator choice, sharding, and reuse."""
from .build import Planner, Stream
from .initialize import initialize

__all__ = ["Planner", "Stream", "initialize"]
