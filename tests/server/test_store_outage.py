"""The server when its PostgreSQL session store cannot be reached: 503 with ``Retry-After`` on
every route that reads or writes sessions, never a 500."""

from __future__ import annotations

import httpx

from tests.server.conftest import Start
from tests.sessions.test_postgres_outage import closed_port
from trio_agents import BaseAgent
from trio_agents.server import create_app
from trio_agents.sessions import PostgresSessionService


async def test_the_server_answers_503_with_retry_after_when_the_database_is_unreachable(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    dsn = f"host=127.0.0.1 port={closed_port()} user=postgres dbname=x connect_timeout=2"
    async with PostgresSessionService(dsn) as service:
        app = create_app({"app": BaseAgent(name="app")}, session_service=service)
        url = await start_server(app)
        for method, path in [
            ("GET", "/apps/app/users/u/sessions/s"),
            ("GET", "/apps/app/users/u/sessions"),
            ("POST", "/apps/app/users/u/sessions"),
            ("GET", "/apps/app/users/u/sessions/s/events"),
        ]:
            response = await client.request(method, url + path)
            assert response.status_code == 503, (path, response.text)
            assert response.headers["retry-after"] == "1"
            assert "unreachable" in response.json()["detail"]
