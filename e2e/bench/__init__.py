"""Benchmarks: figures printed and compared against a baseline measured in the same run, never asserted."""
