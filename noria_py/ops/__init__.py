"""Dataflow operators, one module each, all with the interface in ``operator.py``."""
from .aggregate import Aggregate
from .base import Base
from .distinct import Distinct
from .extremum import Extremum
from .filter import Filter
from .join import Join
from .operator import Operator
from .project import Project
from .reader import Reader
from .setop import SetOp
from .sharder import Sharder
from .topk import TopK
from .union import Union
from .values import Values

__all__ = ["Aggregate", "Base", "Distinct", "Extremum", "Filter", "Join", "Operator",
           "Project", "Reader", "SetOp", "Sharder", "TopK", "Union", "Values"]
