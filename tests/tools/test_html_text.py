"""web_fetch's HTML to text (openheim/tools/html_text.py, on html.parser): through `openheim run`, and its rules."""

from __future__ import annotations

from web_fetch_cli import fetch_through_run, page_server

from openheim.tools.html_text import html_to_text

PAGE = (
    b"<html><head><title>T</title><style>p { color: red }</style><script>var x = '<p>hidden</p>';</script>"
    b"</head><body><!-- a comment --><p>caf&eacute; &mdash; &#x263A; &nbsp;</p></body></html>"
)


def test_web_fetch_decodes_every_entity_through_run(isolated_home, tmp_path):
    with page_server({"/page": ({"Content-Type": "text/html; charset=utf-8"}, PAGE)}) as port:
        text = fetch_through_run(isolated_home, tmp_path, f"http://127.0.0.1:{port}/page")
    assert "café — ☺ \u00a0" in text
    assert "color" not in text and "hidden" not in text and "comment" not in text


def test_named_and_numeric_entities_all_decode():
    assert html_to_text("&hearts;&#9731;&#x1F600;&Aacute;&lt;b&gt;&amp;amp;") == "♥☃😀Á<b>&amp;"


def test_scripts_styles_and_comments_are_dropped_even_unclosed():
    html = "<p>a</p><!-- hidden --><SCRIPT type='x'>var a = '<p>';</SCRIPT>b<br/>c<style>x { }"
    assert html_to_text(html) == "a\nb\nc"


def test_blocks_break_lines_and_blank_runs_collapse():
    assert html_to_text("<h1>T</h1>\n\n\n<p>  one <b>two</b> </p><div>three</div>") == "T\n\none two\n\nthree"


def test_a_lone_less_than_sign_is_text():
    assert html_to_text("<p>1 < 2 and 3 > 2</p>") == "1 < 2 and 3 > 2"
