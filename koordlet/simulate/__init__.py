"""Simulation mode: one koordlet process reports NodeMetric status for many (KWOK) nodes from a load file."""
