"""Benchmarks: the workloads of ``docs/benchmarks/workloads.md`` on trio_agents, the Trio
floors and, run by another interpreter, google-adk. Run ``python -m benchmarks --help``."""
