"""The dev UI of ``trio-agents web`` end to end, in headless Chromium driven by Selenium.

Headless Chromium as :mod:`tests.chromium` sets it up (skipped without it, except under CI).
Set ``TRIO_AGENTS_DEV_UI_SCREENSHOT=docs/dev-ui.png`` to save the README's screenshot.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from .chromium import chromium
from .serving import APPS, served


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


class Page:
    """The dev UI in the browser, with waits that fail with what the page showed."""

    def __init__(self, driver: webdriver.Chrome, url: str) -> None:
        self.driver = driver
        driver.get(f"{url}/dev-ui/")

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 20) -> Any:
        def check(driver: Any) -> Any:
            return condition()

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(check)
        except Exception as exc:
            status = self.one("#status").text
            raise AssertionError(f"waited for {what}; status: {status!r}") from exc

    def all(self, selector: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def pick_app(self, name: str) -> None:
        self.wait(lambda: name in [o.text for o in self.all("#app option")], f"the app {name}")
        Select(self.one("#app")).select_by_value(name)

    def new_session(self) -> str:
        before = Select(self.one("#session")).first_selected_option.get_attribute("value")
        self.one("#new-session").click()
        return str(
            self.wait(
                lambda: (v := self.one("#session").get_attribute("value")) and v != before and v,
                "a new session",
            )
        )

    def send(self, text: str) -> None:
        self.one("#message").send_keys(text)
        self.one("#send").click()

    def status(self, state: str) -> None:
        self.wait(lambda: self.one("#status").get_attribute("data-state") == state, state)

    def lanes(self) -> list[str]:
        return [head.text for head in self.all(".lane-head")]


def test_chat_timeline_lanes_deltas_and_cancel(browser: webdriver.Chrome) -> None:
    with served("web", APPS) as server:
        page = Page(browser, server.url)
        page.pick_app("fanout")
        page.new_session()
        page.send("Fan out, please")
        page.status("done")
        lanes = page.lanes()  # in order of first appearance: the branches race
        assert lanes[0] == "main (no branch)"
        assert sorted(lanes[1:]) == ["gather.left", "gather.right"]
        left = page.all(".event[data-branch='gather.left']")
        right = page.all(".event[data-branch='gather.right']")
        assert len(left) == 1 and len(right) == 3  # the call, its response, the answer
        assert {card.get_attribute("data-lane") for card in left + right} == {"2", "3"}
        assert page.one(".terminal.done").text == "■ done"
        chat = page.one("#chat").text
        assert "Left side here." in chat and "Both branches are done." in chat

        left[0].find_element(By.TAG_NAME, "summary").click()
        delta = page.wait(lambda: left[0].find_element(By.CSS_SELECTOR, ".state-delta"), "delta")
        page.wait(delta.is_displayed, "the state delta shown")
        assert '"left_said": "Left side here."' in delta.text
        saved = next(c for c in right if c.find_elements(By.CSS_SELECTOR, ".badge.artifact"))
        saved.find_element(By.TAG_NAME, "summary").click()
        assert '"note.txt": 0' in saved.find_element(By.CSS_SELECTOR, ".artifact-delta").text
        if shot := os.environ.get("TRIO_AGENTS_DEV_UI_SCREENSHOT"):
            browser.set_window_size(1440, 1180)  # the whole run, down to its terminal frame
            browser.save_screenshot(shot)

        page.pick_app("slow")
        session_id = page.new_session()
        page.send("Take your time")
        page.wait(lambda: "tick 3" in page.one(".bubble.live").text, "streamed chunks")
        page.wait(page.one("#cancel").is_enabled, "the Cancel button")
        page.one("#cancel").click()
        page.status("cancelled")
        assert page.one(".terminal.cancelled").text == "■ cancelled"
        page.wait(page.one("#send").is_enabled, "the Send button again")

        with httpx.Client(base_url=server.url, timeout=15) as http:
            stored = http.get(f"/apps/slow/users/user/sessions/{session_id}").json()
        assert server.stop() == 0
    assert stored["state"] == {"started": True}
    assert [(e["author"], e["content"]["parts"][0]["text"]) for e in stored["events"]] == [
        ("user", "Take your time"),
        ("slow", "Working on it…"),
    ]


def test_with_a_bearer_token_the_page_asks_for_it(browser: webdriver.Chrome) -> None:
    with served("web", APPS, "--auth-token", "let-me-in") as server:
        page = Page(browser, server.url)
        form = page.one("#token-form")
        page.wait(form.is_displayed, "the token form")
        assert "bearer token" in page.one("#notice").text
        page.one("#token").send_keys("let-me-in")
        form.submit()
        page.pick_app("slow")
        page.wait(lambda: not form.is_displayed(), "the token form to close")
        stored = browser.execute_script("return sessionStorage.getItem('trio_agents.token')")
        assert server.stop() == 0
    assert stored == "let-me-in"
