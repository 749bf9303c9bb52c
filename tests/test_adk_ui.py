"""google-adk's own dev UI (the Angular app in its wheel) against our server, in headless Chromium.

``trio-agents web --adk-ui`` serves the installed google-adk's UI over our API and dev routes.
The tests chat, open the agent graph and the traces, make an agent fail, and answer a tool's
confirmation request with the UI's own form; every request the UI makes must succeed (fonts
are blocked: nothing leaves the machine). Needs google-adk (``pip install
'trio_agents[adk-ui]'``; ``.ci/run`` installs it) and Chromium.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.wait import WebDriverWait

from .chromium import chromium, require
from .desk_app import REFUND_ARGS
from .serving import served

WEATHER = """
from trio_agents import Content, FunctionCall, LlmAgent, Part, ToolContext
from trio_agents.models import LlmResponse
from trio_agents.testing import ScriptedModel


def get_weather(city: str, tool_context: ToolContext) -> dict:
    \"\"\"The weather in a city.\"\"\"
    tool_context.state["last_city"] = city
    return {"city": city, "sky": "sunny"}


def answer(request):
    if any(part.function_response for part in request.contents[-1].parts):
        return LlmResponse(content=Content(role="model", parts=[Part(text="Sunny in Oslo.")]))
    call = FunctionCall(name="get_weather", args={"city": "Oslo"})
    return LlmResponse(content=Content(role="model", parts=[Part(function_call=call)]))


root_agent = LlmAgent(
    name="weather", model=ScriptedModel(answer), tools=[get_weather], instruction="Be brief."
)
"""

GREETER = """
from trio_agents import BaseAgent, Content, Event


class Greeter(BaseAgent):
    async def _run_async_impl(self, ctx):
        if ctx.user_content.text == "boom":
            raise RuntimeError("boom requested")
        await ctx.emit(Event(content=Content.from_text("Hello!", role="model")))


root_agent = Greeter(name="greeter")
"""

ASKED_FOR = [
    "/config/telemetry",
    "/dev/apps/weather/build_graph",
    "/dev/apps/weather/build_graph_image?dark_mode=",
    "/dev/apps/weather/builder",
    "/dev/apps/weather/eval_sets",
    "/dev/apps/weather/eval_results",
    "/dev/apps/weather/debug/trace/session/",
    "/run_sse",
]
"""Requests the UI makes of the routes ADK's dev server adds; each must answer 200."""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    if importlib.util.find_spec("google.adk") is None:
        require("google-adk is not installed (pip install 'trio_agents[adk-ui]'; .ci/run does)")
    with chromium(tmp_path_factory.mktemp("chromium"), network_log=True) as driver:
        yield driver


@pytest.fixture
def apps(tmp_path: Path) -> Path:
    for name, code in [("weather", WEATHER), ("greeter", GREETER)]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(textwrap.dedent(code))
    return tmp_path


class AdkPage:
    """ADK's dev UI for one app, with bounded waits that say what they waited for."""

    def __init__(self, driver: webdriver.Chrome, url: str, app: str) -> None:
        self.driver = driver
        driver.get(f"{url}/dev-ui/?app={app}")

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 20) -> Any:
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(
                lambda _: condition()
            )
        except Exception as exc:
            raise AssertionError(f"waited for {what}; the page shows:\n{self.text()}") from exc

    def text(self) -> str:
        return str(self.driver.find_element(By.TAG_NAME, "body").text)

    def send(self, message: str) -> None:
        box = self.wait(
            lambda: self.driver.find_elements(By.CSS_SELECTOR, "textarea.chat-input-box"),
            "the message box",
        )[0]
        box.send_keys(message)
        box.send_keys(Keys.ENTER)

    def shows(self, text: str) -> None:
        self.wait(lambda: text in self.text(), repr(text))

    def click_text(self, text: str) -> None:
        self.driver.find_element(By.XPATH, f"//*[normalize-space(text())={text!r}]").click()

    def graph_labels(self) -> set[str]:
        return {label.text for label in self.driver.find_elements(By.CSS_SELECTOR, "svg text")}

    def snack(self) -> str:
        bars = self.driver.find_elements(By.CSS_SELECTOR, "simple-snack-bar")
        return str(bars[0].text) if bars else ""


def _statuses(driver: webdriver.Chrome) -> list[tuple[int, str]]:
    """(status, path) of every response the page got since the last call."""
    found = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.responseReceived":
            response = message["params"]["response"]
            url = str(response["url"])
            if url.startswith("http://127.0.0.1"):
                found.append((int(response["status"]), "/" + url.split("/", 3)[3]))
    return found


def test_adk_s_dev_ui_chats_draws_the_graph_traces_and_shows_errors(
    browser: webdriver.Chrome, apps: Path
) -> None:
    with served("web", str(apps), "--adk-ui") as server:
        assert f"ADK's dev UI: {server.url}/dev-ui/" in server.output
        page = AdkPage(browser, server.url, "weather")
        page.send("weather?")
        page.shows("Sunny in Oslo.")
        assert 'get_weather("Oslo")' in page.text()
        assert "State: last_city" in page.text()
        page.wait(lambda: {"weather", "get_weather"} <= page.graph_labels(), "the agent graph")
        page.click_text("Sunny in Oslo.")  # the event's details name its node
        page.click_text("info")  # the event's Info tab (an icon)
        page.shows("weather@1")

        page.click_text("Traces")
        page.shows("generate_content scripted")
        assert "INVOCATION ID" in page.text()

        statuses = _statuses(browser)
        for path in ASKED_FOR:
            answers = {status for status, seen in statuses if seen.startswith(path)}
            assert answers == {200}, (path, statuses)
        failed = [(s, p) for s, p in statuses if s >= 400 and p != "/dev-ui/prism-dark.css"]
        assert failed == []  # the UI's stylesheet for code blocks is missing in ADK's wheel too

        page = AdkPage(browser, server.url, "greeter")
        page.send("boom")
        page.wait(page.snack, "the error snackbar")
        assert page.snack().splitlines()[0] == "RuntimeError: boom requested"

        with httpx.Client(base_url=server.url, timeout=15) as http:
            eval_set = http.post("/dev/apps/weather/eval-sets", json={"eval_set": {}})
            telemetry = http.get("/config/telemetry").json()
        assert eval_set.status_code == 501
        assert "does not implement evaluations" in eval_set.json()["detail"]
        assert telemetry == {"telemetry": False}
        assert server.stop() == 0


def test_adk_s_dev_ui_answers_a_confirmation_request(browser: webdriver.Chrome) -> None:
    """Its confirmation form (the hint, a Confirmed box, Submit) resumes the paused run."""
    with served("web", "tests/desk_app.py", "--adk-ui") as server:
        page = AdkPage(browser, server.url, "desk")
        page.send("A refund, please")
        page.shows("Approve or reject the call to refund()")
        box = page.wait(
            lambda: browser.find_elements(By.CSS_SELECTOR, "input[id^=confirmed-checkbox]"),
            "the Confirmed checkbox",
        )[0]
        call_id = box.get_attribute("id").removeprefix("confirmed-checkbox-standalone-")
        box.click()
        page.click_text("Submit")
        page.shows('refund answered {"order": "A-17", "refunded": 5}')

        with httpx.Client(base_url=server.url, timeout=15) as http:
            [session] = http.get("/apps/desk/users/user/sessions").json()
            stored = http.get(f"/apps/desk/users/user/sessions/{session['id']}").json()
        assert server.stop() == 0
    answer = {
        "id": call_id,
        "name": "adk_request_confirmation",
        "response": {"confirmed": True, "payload": REFUND_ARGS},  # its payload box's default
    }
    events = stored["events"]
    users = [e["content"] for e in events if e["author"] == "user"]
    assert users[1:] == [{"role": "user", "parts": [{"functionResponse": answer}]}]
    assert stored["state"]["refunded"] == {**REFUND_ARGS, "payload": REFUND_ARGS}
    assert len({e["invocationId"] for e in events}) == 1  # the paused invocation carried on
    runs = {status for status, path in _statuses(browser) if path == "/run_sse"}
    assert runs == {200}  # (the log may still hold a request of the test before)
