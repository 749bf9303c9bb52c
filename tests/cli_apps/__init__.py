"""A directory of ADK-style agent packages for the ``api-server`` and ``web`` tests.

``fanout``: a ParallelAgent of two scripted LLM agents (two lanes; state and artifact deltas),
then a summary. ``slow``: commits one event, then streams partial chunks until cancelled.
"""
