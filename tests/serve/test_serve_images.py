"""The web page's images and cost, in headless Chromium: an image chosen with the file picker and one pasted
into the message box reach the model; the header shows what the session spent; reopening replays the images."""

from __future__ import annotations

import base64
import os
import shutil

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer, Reply
from image_fixtures import GIF, PNG, images_in
from test_serve_page import browser, texts, wait  # noqa: F401  (the module's browser fixture)
from ws_client import running_server

if not (shutil.which("chromium") and shutil.which("chromedriver")) and not os.environ.get("CI"):
    pytest.skip("needs Debian's chromium and chromium-driver", allow_module_level=True)

PRICES = '[prices."fake/fake-model"]\ninput = 3.0\noutput = 15.0\n'
PASTE = """
const bytes = Uint8Array.from(atob(arguments[0]), (c) => c.charCodeAt(0));
const data = new DataTransfer();
data.items.add(new File([bytes], "pasted.gif", { type: "image/gif" }));
document.getElementById("prompt").dispatchEvent(
  new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
"""


def test_file_picker_and_paste_send_images(browser, isolated_home, project, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    find = lambda selector: browser.find_element(By.CSS_SELECTOR, selector)
    (tmp_path / "dot.png").write_bytes(PNG)
    (tmp_path / "notes.txt").write_text("words")
    with FakeLLMServer(wire="openai") as srv:
        # the cost rides on ACP's usage_update, which needs the context window
        write_config(isolated_home, srv.base_url, extra=PRICES, provider_extra="context_window = 8000")
        with running_server(project) as server:
            browser.get(f"http://127.0.0.1:{server.port}/")
            wait(browser, lambda d: find("#status").text == "connected")
            find("#image-input").send_keys(str(tmp_path / "dot.png"))
            browser.execute_script(PASTE, base64.b64encode(GIF).decode())
            wait(browser, lambda d: texts(d, ".attachment span") == ["dot.png", "pasted.gif"])
            find("#image-input").send_keys(str(tmp_path / "notes.txt"))
            wait(browser, lambda d: "notes.txt is not a PNG, JPEG, GIF or WebP image" in texts(d, ".note.error"))
            srv.enqueue(Reply(text="two dots", usage=(10_000, 100)))
            find("#prompt").send_keys("what are these", Keys.ENTER)
            wait(browser, lambda d: texts(d, ".msg.agent") == ["two dots"])
            assert images_in(srv.requests[0].body, "openai") == [
                ("image/png", base64.b64encode(PNG).decode()),
                ("image/gif", base64.b64encode(GIF).decode()),
            ]
            shown = browser.find_elements(By.CSS_SELECTOR, ".msg.user img")
            assert [img.get_property("naturalWidth") for img in shown] == [1, 1]  # decoded: the page's CSP allows it
            assert texts(browser, ".attachment span") == []
            wait(browser, lambda d: find("#cost").text == "$0.0315")
            browser.refresh()
            wait(browser, lambda d: "what are these" in texts(d, "#sessions .title"))
            find("#sessions li[data-id]").click()
            wait(browser, lambda d: "session restored" in texts(d, ".note"))
            assert len(browser.find_elements(By.CSS_SELECTOR, ".msg.user img")) == 2
