"""Tests of noria_py.planner: which nodes a view becomes, how they are sharded, shared
and removed, and how new ones are filled from existing state."""
