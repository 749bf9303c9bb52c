"""The server benchmark's apps on google-adk (an ``adk api_server`` agents folder)."""
