"""The serve page as a new user meets it, in headless Chromium: a loading state until the sessions arrive,
Markdown replies rendered safely (model HTML stays text), the permission prompt inside its tool card with a
diff preview, the plan, the model picker, and deleting a session after a confirmation."""

from __future__ import annotations

from fake_llm import Reply, ToolCall
from test_serve_page import browser, texts, wait  # noqa: F401  (browser: the module's Chromium fixture)
from ws_client import running_server

from openheim import OpenheimClient

WATCH = """
window.__seen = [];
document.addEventListener("DOMContentLoaded", () => {
  const snap = () => window.__seen.push([document.getElementById("status").textContent,
                                         document.getElementById("sessions").textContent]);
  snap();
  new MutationObserver(snap).observe(document.body, {subtree: true, childList: true, characterData: true});
});
"""

MARKDOWN = (
    "## Summary\n\nSome **bold words**, *slanted* and `inline_code`.\n\n- first item\n- second **item**\n"
    "  - nested item\n\n1. one\n2. two\n\n> quoted text\n\n```python\ndef f():\n    return '<b>x</b>'\n```\n\n"
    "A [safe link](https://example.org/docs) and a [bad one](javascript:alert(1)). "
    '<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> **unfinished'
)


def find(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def finds(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def titles(driver) -> list[str]:
    """The session list's titles, read in one go (the list is rebuilt while the page works)."""
    return driver.execute_script("return [...document.querySelectorAll('#sessions .title')].map(e => e.textContent)")


def seed_sessions(project, n: int, srv) -> list[str]:
    client = OpenheimClient.builder().work_dir(project).build()
    try:
        ids = []
        for i in range(n):
            handle = client.new_session(project)
            handle.prompt(f"earlier topic {i}")
            ids.append(handle.id)
        return ids
    finally:
        client.close()


def send(driver, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    wait(driver, lambda d: not find(d, "#send").get_property("disabled"))
    find(driver, "#prompt").send_keys(text, Keys.ENTER)


def test_page_ux(browser, srv, project, isolated_home):  # noqa: F811
    from selenium.webdriver.common.action_chains import ActionChains

    seed_sessions(project, 3, srv)
    (project / "notes.txt").write_text("alpha\nold line\nomega\n")
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
    try:
        with running_server(project) as server:
            browser.get(f"http://127.0.0.1:{server.port}/")
            wait(browser, lambda d: find(d, "#status").text == "connected")
            wait(browser, lambda d: len(titles(d)) == 3)

            # loading state: never "connected" or "No sessions yet" before the list was there
            seen = browser.execute_script("return window.__seen")
            assert seen[0][1] == "Loading sessions…" and seen[0][0] != "connected"
            assert all("earlier topic" in sessions for status, sessions in seen if status == "connected")
            assert not any("No sessions yet" in sessions for _, sessions in seen)

            # Markdown, rendered as DOM nodes; the model's HTML stays text
            srv.enqueue(Reply(text=MARKDOWN, chunk_size=5))
            send(browser, "show markdown")
            wait(browser, lambda d: "**unfinished" in " ".join(texts(d, ".msg.agent")))
            bubble = find(browser, ".msg.agent")
            assert texts(browser, ".msg.agent h2") == ["Summary"]
            assert texts(browser, ".msg.agent strong")[:2] == ["bold words", "item"]
            assert texts(browser, ".msg.agent em") == ["slanted"]
            assert texts(browser, ".msg.agent p code") == ["inline_code"]
            assert texts(browser, ".msg.agent ul > li")[0] == "first item"
            assert texts(browser, ".msg.agent ul ul > li") == ["nested item"]
            assert texts(browser, ".msg.agent ol > li") == ["one", "two"]
            assert texts(browser, ".msg.agent blockquote") == ["quoted text"]
            assert find(browser, ".msg.agent pre code").text == "def f():\n    return '<b>x</b>'"
            links = finds(browser, ".msg.agent a")
            assert [(a.text, a.get_attribute("href")) for a in links] == [("safe link", "https://example.org/docs")]
            assert "and a bad one. <img" in bubble.text  # a javascript: link is its text only
            assert not finds(browser, ".msg.agent img, .msg.agent script, .msg.agent b")
            assert '<img src=x onerror="window.__xss=1">' in bubble.text and "<script>" in bubble.text
            assert browser.execute_script("return window.__xss === undefined")

            # permission prompt inside its tool card, with the diff the call will make
            srv.enqueue(
                Reply(
                    tool_calls=[
                        ToolCall("edit_file", {"path": "notes.txt", "old_string": "old line", "new_string": "new line"})
                    ]
                ),
                Reply(text="edited"),
            )
            send(browser, "edit it")
            wait(browser, lambda d: finds(d, ".tool .permission .preview"))
            preview = find(browser, ".tool .permission .preview").text
            assert "- old line" in preview and "+ new line" in preview and "notes.txt" in preview
            find(browser, ".tool .permission button[data-option=allow_once]").click()
            wait(browser, lambda d: "edited" in texts(d, ".msg.agent"))
            card = finds(browser, ".tool")[-1]
            assert "completed" in card.get_attribute("class") and "Allow Once" in card.text
            order = browser.execute_script(
                "const c = [...document.querySelectorAll('#transcript > *')];"
                "return [c.indexOf(document.querySelector('.tool')), "
                "c.indexOf([...document.querySelectorAll('.msg.agent')].pop())]"
            )
            assert order[0] < order[1]  # the card (with its answered prompt) before the reply that followed
            assert (project / "notes.txt").read_text() == "alpha\nnew line\nomega\n"

            # the plan
            plan = {
                "plan": [
                    {"step": "look around", "status": "completed"},
                    {"step": "fix the bug", "status": "in_progress"},
                ]
            }
            srv.enqueue(Reply(tool_calls=[ToolCall("update_plan", plan)]), Reply(text="planned"))
            send(browser, "plan it")
            wait(browser, lambda d: "planned" in texts(d, ".msg.agent"))
            assert texts(browser, ".plan li") == ["✓ look around", "▸ fix the bug"]
            assert find(browser, ".plan li.in_progress").text == "▸ fix the bug"

            # the model picker
            picker = find(browser, "#model-picker")
            values = [o.get_attribute("value") for o in finds(browser, "#model-picker option")]
            assert len(values) == 2 and picker.get_attribute("value") == values[0]
            from selenium.webdriver.support.ui import Select

            Select(picker).select_by_index(1)
            wait(browser, lambda d: any(t.startswith("model: other-model") for t in texts(d, ".note")))
            send(browser, "which model")
            wait(browser, lambda d: "echo: which model" in texts(d, ".msg.agent"))
            assert srv.requests[-1].body["model"] == "other-model"

            # deleting a session: asked first; Keep keeps it, Delete removes it
            wait(browser, lambda d: len(titles(d)) == 4)
            victim = finds(browser, "#sessions li[data-id]")[-1]
            victim_id = victim.get_attribute("data-id")
            ActionChains(browser).move_to_element(victim).perform()
            victim.find_element("css selector", ".delete").click()
            victim.find_element("css selector", ".confirm button:not(.danger)").click()
            assert not victim.find_elements("css selector", ".confirm")
            assert (isolated_home / "history" / f"{victim_id}.json").exists()
            ActionChains(browser).move_to_element(victim).perform()
            victim.find_element("css selector", ".delete").click()
            victim.find_element("css selector", ".confirm .danger").click()
            wait(browser, lambda d: len(titles(d)) == 3)
            assert victim_id not in [li.get_attribute("data-id") for li in finds(browser, "#sessions li[data-id]")]
            assert not (isolated_home / "history" / f"{victim_id}.json").exists()
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": "1"})
