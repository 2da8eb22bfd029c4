"""MASBench: a generator of five-axis, exactly-solvable multi-agent benchmark tasks."""
