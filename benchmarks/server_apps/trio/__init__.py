"""The server benchmark's apps on trio_agents (a ``trio-agents api-server`` target)."""
