"""Tests of the cluster runtime."""
