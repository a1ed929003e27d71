"""Tests of the runtimes."""
