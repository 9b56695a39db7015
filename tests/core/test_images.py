"""Images from the user: `openheim run -i FILE` reaches each wire's request body, is stored with the session
by hash (not inline in the log), and comes back on resume; bad files are one-line errors."""

from __future__ import annotations

import json

import pytest
from cli_helpers import fake_provider, openheim
from image_fixtures import GIF, GIF_B64, PNG, PNG_B64, images_in

from openheim.core.images import MAX_IMAGE_BYTES, looks_like_image_path, sniff


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_run_image_reaches_the_wire_and_survives_resume(kind, isolated_home, tmp_path):
    (tmp_path / "dot.png").write_bytes(PNG)
    (tmp_path / "dot.gif").write_bytes(GIF)
    with fake_provider(kind, isolated_home) as srv:
        r = openheim("run", "-o", "json", "-i", "dot.png", "--image", "dot.gif", "what are these", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert images_in(srv.requests[0].body, kind) == [("image/png", PNG_B64), ("image/gif", GIF_B64)]
        session = json.loads(r.stdout)["session_id"]
        # stored once, by hash: the log line names the image, the bytes live in history/images/
        log_line = (isolated_home / "history" / f"{session}.jsonl").read_text().splitlines()[0]
        assert PNG_B64 not in log_line and '"sha256"' in log_line
        stored = sorted(p.read_bytes() for p in (isolated_home / "history" / "images").iterdir())
        assert stored == sorted([PNG, GIF])
        r = openheim("run", "-s", session, "and now?", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert images_in(srv.requests[1].body, kind) == [("image/png", PNG_B64), ("image/gif", GIF_B64)]


def test_bad_images_are_one_line_errors(isolated_home, tmp_path):
    (tmp_path / "notes.txt").write_text("not a picture")
    (tmp_path / "huge.png").write_bytes(PNG[:16] + b"\0" * (MAX_IMAGE_BYTES + 1))
    with fake_provider("openai", isolated_home) as srv:
        for name, expected in (
            ("notes.txt", "is not a PNG, JPEG, GIF or WebP image"),
            ("huge.png", "over the 5.0 MB limit"),
            ("missing.png", "does not exist"),
        ):
            r = openheim("run", "-i", name, "look", cwd=tmp_path)
            assert r.returncode == 2, r.stderr
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and expected in lines[0], r.stderr
        assert srv.requests == []


def test_sniffing_and_pasted_paths(tmp_path):
    assert sniff(PNG) == "image/png" and sniff(GIF) == "image/gif"
    assert sniff(b"\xff\xd8\xff\xe0") == "image/jpeg" and sniff(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert sniff(b"<svg") is None
    (tmp_path / "shot one.png").write_bytes(PNG)
    (tmp_path / "fake.png").write_text("text")
    assert looks_like_image_path(f"'{tmp_path}/shot one.png'") == tmp_path / "shot one.png"
    assert looks_like_image_path(f"file://{tmp_path}/shot\\ one.png") == tmp_path / "shot one.png"
    assert looks_like_image_path(f"{tmp_path}/fake.png") is None
    assert looks_like_image_path("describe shot.png please") is None
