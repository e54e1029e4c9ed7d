"""Benchmarks: ``make bench`` (``python -m bench``); results are reported in the README."""
