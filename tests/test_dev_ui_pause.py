"""The dev UI answers a paused run, in headless Chromium against ``trio-agents web``.

The app (:mod:`tests.desk_app`, resumable) pauses on a refund's confirmation request or on a
long-running ticket. The page lists the open call; Approve, Deny or Answer sends its function
response with the invocation's id to ``/run_sse`` and the run carries on in the same view. A run
that failed is resumed with the Resume button. Each path checks the request the page sent and
what the session stores afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.desk_app import REFUND_ARGS, TICKET_ARGS
from tests.server.helpers import json_calls, json_responses, json_texts

from .chromium import chromium
from .serving import Served, served
from .test_dev_ui import Page

CONFIRMATION = "adk_request_confirmation"

RECORD_REQUESTS = """
window.sentBodies = [];
const original = window.fetch;
window.fetch = (path, init) => {
  if (init && init.body) window.sentBodies.push([path, JSON.parse(init.body)]);
  return original(path, init);
};
"""
"""Keeps the body of every request the page sends, to compare with what was meant."""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


@pytest.fixture(scope="module")
def desk() -> Iterator[Served]:
    with served("web", "tests/desk_app.py") as server:
        yield server
        assert server.stop() == 0


class DeskPage(Page):
    """The dev UI on a new session of the desk app, recording the request bodies it sends."""

    def __init__(self, driver: webdriver.Chrome, url: str) -> None:
        super().__init__(driver, url)
        driver.execute_script(RECORD_REQUESTS)
        self.pick_app("desk")
        self.session_id = self.new_session()

    def open_call(self, kind: str) -> WebElement:
        self.status("paused")
        cards = self.all("#open-calls .open-call")
        assert [card.get_attribute("data-kind") for card in cards] == [kind]
        assert self.one("#open-calls").is_displayed()
        return cards[0]

    def last_run_body(self) -> dict[str, Any]:
        sent = self.driver.execute_script("return window.sentBodies")
        runs = [body for path, body in sent if path == "/run_sse"]
        return dict(runs[-1])

    def chat(self) -> str:
        return str(self.one("#chat").text)


def _stored(server: Served, session_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=server.url, timeout=15) as http:
        response = http.get(f"/apps/desk/users/user/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def _last_text(events: list[dict[str, Any]]) -> str:
    """The last text the agent said (checkpoint events without content follow it)."""
    return json_texts([event for event in events if event["author"] != "user"])[-1]


def _paused_on(events: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], str]:
    """The open call named ``name`` and the invocation it paused."""
    [call] = json_calls(events, name)
    [event] = [e for e in events if call["id"] in e.get("longRunningToolIds", [])]
    return call, str(event["invocationId"])


def _answer_body(page: DeskPage, invocation_id: str, part: dict[str, Any]) -> dict[str, Any]:
    return {
        "appName": "desk",
        "userId": "user",
        "sessionId": page.session_id,
        "invocationId": invocation_id,
        "newMessage": {"role": "user", "parts": [{"functionResponse": part}]},
        "streaming": True,
    }


def test_approving_a_confirmation_runs_the_tool_with_the_payload(
    browser: webdriver.Chrome, desk: Served
) -> None:
    page = DeskPage(browser, desk.url)
    page.send("A refund, please")
    card = page.open_call("confirmation")
    assert "refund()" in card.find_element(By.CSS_SELECTOR, ".hint").text
    original = card.find_element(By.CSS_SELECTOR, ".original").text
    assert original == 'refund({"order":"A-17","amount":5})'
    assert page.one(".terminal.paused").text == "■ paused"
    paused = _stored(desk, page.session_id)["events"]
    request, invocation_id = _paused_on(paused, CONFIRMATION)

    card.find_element(By.CSS_SELECTOR, ".payload").send_keys('{"approver": "Ann"}')
    card.find_element(By.CSS_SELECTOR, ".approve").click()
    page.status("done")
    assert 'refund answered {"order": "A-17", "refunded": 5}' in page.chat()
    assert not page.one("#open-calls").is_displayed()
    assert page.all(".event .what")[-1].text == "checkpoint: end of agent"
    answer = {
        "id": request["id"],
        "name": CONFIRMATION,
        "response": {"confirmed": True, "payload": {"approver": "Ann"}},
    }
    assert page.last_run_body() == _answer_body(page, invocation_id, answer)

    stored = _stored(desk, page.session_id)
    events = stored["events"]
    assert stored["state"] == {"refunded": {**REFUND_ARGS, "payload": {"approver": "Ann"}}}
    assert json_responses(events, "user") == [answer]
    ran = [r for r in json_responses(events, "desk") if r["response"].get("refunded") == 5]
    assert len(ran) == 1  # the tool ran once, after the approval
    assert _last_text(events).startswith("refund answered")
    assert {e["invocationId"] for e in events[len(paused) :]} == {invocation_id}


def test_denying_a_confirmation_never_runs_the_tool(
    browser: webdriver.Chrome, desk: Served
) -> None:
    page = DeskPage(browser, desk.url)
    page.send("A refund, please")
    card = page.open_call("confirmation")
    paused = _stored(desk, page.session_id)["events"]
    request, invocation_id = _paused_on(paused, CONFIRMATION)
    card.find_element(By.CSS_SELECTOR, ".deny").click()
    page.status("done")
    assert "The user rejected the call to `refund()`" in page.chat()
    answer = {"id": request["id"], "name": CONFIRMATION, "response": {"confirmed": False}}
    assert page.last_run_body() == _answer_body(page, invocation_id, answer)

    stored = _stored(desk, page.session_id)
    events = stored["events"]
    assert stored["state"] == {}
    assert json_responses(events, "user") == [answer]
    assert not [r for r in json_responses(events, "desk") if "refunded" in r["response"]]
    assert _last_text(events).startswith('refund answered {"error"')
    assert {e["invocationId"] for e in events[len(paused) :]} == {invocation_id}


def test_a_long_running_call_is_answered_with_json_also_after_a_reload(
    browser: webdriver.Chrome, desk: Served
) -> None:
    page = DeskPage(browser, desk.url)
    page.send("Open a ticket")
    page.open_call("long-running")
    paused = _stored(desk, page.session_id)["events"]
    call, invocation_id = _paused_on(paused, "open_ticket")
    assert call["args"] == TICKET_ARGS

    browser.refresh()  # the page finds the open call again in the stored session
    browser.execute_script(RECORD_REQUESTS)
    page.pick_app("desk")  # the session updated last comes first
    page.wait(lambda: page.one("#session").get_attribute("value") == page.session_id, "it")
    card = page.open_call("long-running")
    assert card.find_element(By.CSS_SELECTOR, ".call").text == 'open_ticket({"topic":"printer"})'

    button = card.find_element(By.CSS_SELECTOR, ".answer")
    box = card.find_element(By.CSS_SELECTOR, ".answer-json")
    problem = card.find_element(By.CSS_SELECTOR, ".problem")
    button.click()
    page.wait(problem.is_displayed, "the empty answer refused")
    assert problem.text == "type the answer (JSON) first"
    box.send_keys("fixed")
    button.click()
    page.wait(lambda: problem.text.startswith("not JSON"), "the answer that is not JSON refused")
    box.clear()
    box.send_keys('{"status": "fixed"}')
    button.click()
    page.status("done")
    assert 'open_ticket answered {"status": "fixed"}' in page.chat()
    answer = {"id": call["id"], "name": "open_ticket", "response": {"status": "fixed"}}
    assert page.last_run_body() == _answer_body(page, invocation_id, answer)

    events = _stored(desk, page.session_id)["events"]
    assert json_responses(events, "user") == [answer]
    assert _last_text(events) == 'open_ticket answered {"status": "fixed"}'
    assert {e["invocationId"] for e in events[len(paused) :]} == {invocation_id}


def test_a_failed_run_of_a_resumable_app_is_resumed_with_one_click(
    browser: webdriver.Chrome, desk: Served
) -> None:
    page = DeskPage(browser, desk.url)
    page.send("Please look up my order")
    page.status("error")
    assert "the order database is down" in page.one("#status").text
    resume = page.one("#resume")
    page.wait(resume.is_displayed, "the Resume button")
    failed = _stored(desk, page.session_id)["events"]
    invocation_id = failed[0]["invocationId"]

    resume.click()
    page.status("done")
    assert 'look_up answered {"order": "A-17", "status": "shipped"}' in page.chat()
    assert not resume.is_displayed()
    assert page.last_run_body() == {
        "appName": "desk",
        "userId": "user",
        "sessionId": page.session_id,
        "invocationId": invocation_id,
        "streaming": True,
    }
    events = _stored(desk, page.session_id)["events"]
    assert [e["content"] for e in events if e["author"] == "user"] == [
        {"role": "user", "parts": [{"text": "Please look up my order"}]}
    ]  # not stored again
    assert {e["invocationId"] for e in events} == {invocation_id}
    assert _last_text(events) == 'look_up answered {"order": "A-17", "status": "shipped"}'
