"""Benchmark evaluation: in-domain metrics, BFCL, tau2-bench, comparison."""
