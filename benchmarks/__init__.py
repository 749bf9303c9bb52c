"""Benchmarks: the workloads of ``bench/WORKLOADS.md`` on trio_agents, the Trio floors and,
run by another interpreter, google-adk. Run ``python -m benchmarks --help``."""
