"""Benchmarks behind the `tfdqn` command: compare, time-to-score, atari100k and aggregate, and what they share."""
