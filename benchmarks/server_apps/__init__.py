"""The two apps of the server benchmark, written once for each framework.

``trio/`` is a ``trio-agents api-server`` target and ``adk/`` an ``adk api_server`` agents
folder; each holds ``emit20`` (a custom agent that emits 20 events, each with a state delta) and
``tool1`` (an ``LlmAgent`` on a scripted model: one call of the tool ``lookup``, then an answer).
No network, no API key.
"""
