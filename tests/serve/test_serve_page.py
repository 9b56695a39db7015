"""The web page of `openheim serve`, driven in Debian's headless Chromium (selenium + chromium-driver)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fake_llm import Reply, ToolCall
from ws_client import TOKEN, running_server, serve_process

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

if not (CHROMIUM and CHROMEDRIVER) and not os.environ.get("CI"):
    pytest.skip(
        "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver; .ci/run installs them)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,860",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def wait(driver, condition, timeout: float = 15):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)


def texts(driver, selector: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]


def test_chat_with_a_token_protected_server(browser, srv, project):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    find = lambda selector: browser.find_element(By.CSS_SELECTOR, selector)
    with running_server(project, token=TOKEN) as server:
        browser.get(f"http://127.0.0.1:{server.port}/")

        # the token: asked once, a wrong one refused, the right one kept for the tab
        wait(browser, lambda d: find("#token-dialog").is_displayed())
        find("#token-input").send_keys("not-the-token", Keys.ENTER)
        wait(browser, lambda d: "not accepted" in find("#token-error").text)
        find("#token-input").send_keys(TOKEN, Keys.ENTER)
        wait(browser, lambda d: find("#status").text == "connected")
        assert not find("#token-dialog").is_displayed()

        # a prompt with thinking, a tool call that asks permission, and a streamed reply
        srv.enqueue(
            Reply(
                thinking="The user wants a note, so I will write one.",
                tool_calls=[ToolCall("write_file", {"path": "note.txt", "content": "hello, browser"})],
            ),
            Reply(text="Done: note.txt now says hello.", chunk_size=4),
        )
        find("#prompt").send_keys("Please write a note", Keys.ENTER)
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".permission button"))
        assert [
            b.get_attribute("data-option") for b in browser.find_elements(By.CSS_SELECTOR, ".permission button")
        ] == ["allow_once", "allow_always", "reject_once", "reject_always"]
        assert "Write note.txt" in find(".permission p").text
        find(".permission button[data-option=allow_once]").click()
        wait(browser, lambda d: texts(d, ".msg.agent") == ["Done: note.txt now says hello."])
        wait(browser, lambda d: not find("#send").get_property("disabled"))
        assert texts(browser, ".msg.user") == ["Please write a note"]
        assert texts(browser, "details.thinking .body") == ["The user wants a note, so I will write one."]
        assert find(".tool .title").text == "Write note.txt"
        assert "completed" in find(".tool").get_attribute("class")
        assert find(".permission .answer").text == "Allow Once"
        assert (project / "note.txt").read_text() == "hello, browser"
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "serve-page.png"))

        # cancel a long streamed reply
        srv.enqueue(Reply(text=" ".join(["streaming"] * 500), delay=0.02))
        find("#prompt").send_keys("keep talking", Keys.ENTER)
        wait(browser, lambda d: len(texts(d, ".msg.agent")) == 2 and texts(d, ".msg.agent")[1])
        find("#cancel").click()
        wait(browser, lambda d: "stopped: cancelled" in texts(d, ".note"))
        assert len(texts(browser, ".msg.agent")[1].split()) < 500

        # reload: the token is remembered, the session is listed, opening it replays the conversation
        browser.refresh()
        wait(browser, lambda d: find("#status").text == "connected")
        assert not find("#token-dialog").is_displayed()
        wait(browser, lambda d: "Please write a note" in texts(d, "#sessions .title"))
        find("#sessions li[data-id]").click()
        wait(browser, lambda d: "session restored" in texts(d, ".note"))
        assert texts(browser, ".msg.user") == ["Please write a note", "keep talking"]
        assert texts(browser, ".msg.agent")[0] == "Done: note.txt now says hello."
        assert find(".tool .title").text == "Write note.txt"
        browser.save_screenshot(str(ARTIFACTS / "serve-page-replayed.png"))


def test_the_url_serve_prints_opens_the_page_without_asking_for_the_token(browser, srv, project):
    from selenium.webdriver.common.by import By

    find = lambda selector: browser.find_element(By.CSS_SELECTOR, selector)
    with serve_process(project) as served:  # a real `openheim serve`: no token configured, so one is generated
        browser.get(f"{served.base}/?token={served.token}")
        wait(browser, lambda d: find("#status").text == "connected")
        assert not find("#token-dialog").is_displayed()
        assert "token" not in browser.current_url  # kept for the tab, dropped from the address bar
        browser.refresh()
        wait(browser, lambda d: find("#status").text == "connected")


def test_the_page_lists_only_the_sessions_this_server_can_open(browser, srv, project, tmp_path):
    """A session started in another directory is not offered by a server started here (issue 42, item 2)."""
    from cli_helpers import openheim
    from selenium.webdriver.common.by import By

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert openheim("run", "a prompt from here", cwd=project).returncode == 0
    assert openheim("run", "a prompt from elsewhere", cwd=elsewhere).returncode == 0
    find = lambda selector: browser.find_element(By.CSS_SELECTOR, selector)
    with serve_process(project) as served:
        browser.get(f"{served.base}/?token={served.token}")
        wait(browser, lambda d: find("#status").text == "connected")
        wait(browser, lambda d: "a prompt from here" in texts(d, "#sessions .title"))
        assert not any("elsewhere" in title for title in texts(browser, "#sessions .title"))
