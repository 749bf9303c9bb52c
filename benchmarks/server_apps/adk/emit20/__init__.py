"""The emit20 app for ``adk api_server``."""

from . import agent as agent
