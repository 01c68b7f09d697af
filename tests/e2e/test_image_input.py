"""Image content parts on /v1/chat/completions with the official openai client (issue 19, parts 1-2):
data:, http(s) (a local http server) and file:// sources, the image tokens counted in usage and in
the max-model-len check, bad images answered with a 400 that says why, --limit-mm-per-prompt.
The demo model carries a vision_config and the real Qwen tokenizer; until the engine consumes the
pixels (h-mrope), these tests assert on what the server does around them."""
import base64
import http.server
import io
import json
import threading
import time

import openai
import pytest
from PIL import Image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

# Qwen3.6's preprocessor_config.json (the demo model has none; the server uses these defaults).
PATCH, MERGE, MIN_PIXELS, MAX_PIXELS = 16, 2, 65536, 16777216


def image_tokens(width, height):
    """<|image_pad|> tokens transformers' Qwen3VL processor gives an image of this size."""
    h, w = smart_resize(height, width, factor=PATCH * MERGE, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    return (h // PATCH) * (w // PATCH) // (MERGE * MERGE)


def png_bytes(width, height, colour=(200, 30, 40), mode="RGB"):
    buf = io.BytesIO()
    Image.new(mode, (width, height), colour).save(buf, format="PNG")
    return buf.getvalue()


def data_url(data, mime="image/png"):
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def image_part(url):
    return {"type": "image_url", "image_url": {"url": url}}


def ask(client, *parts, text="What colour is this?", max_tokens=1):
    return client.chat.completions.create(
        model=client.models.list().data[0].id, max_tokens=max_tokens, temperature=0,
        messages=[{"role": "user", "content": [*parts, {"type": "text", "text": text}]}])


class _Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path.startswith("/slow"):
            time.sleep(4)
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "/red.png")
            self.end_headers()
            return
        try:
            super().do_GET()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server under test gave up at its fetch timeout, as it should

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("media")
    (d / "red.png").write_bytes(png_bytes(64, 48))
    (d / "slow.png").write_bytes(png_bytes(64, 48))
    return d


@pytest.fixture(scope="module")
def http_media(media_dir):
    handler = lambda *a, **k: _Handler(*a, directory=str(media_dir), **k)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


@pytest.fixture(scope="module")
def image_server(make_server, media_dir):
    return make_server("--limit-mm-per-prompt", '{"image": 2}', "--allowed-local-media-path", str(media_dir),
                       env={"VLLM_IMAGE_FETCH_TIMEOUT": "1"})


@pytest.fixture()
def iclient(image_server):
    return openai.OpenAI(base_url=image_server.url + "/v1", api_key="unused", max_retries=0)


def bad_request(fn):
    with pytest.raises(openai.BadRequestError) as e:
        fn()
    assert e.value.status_code == 400
    return e.value.body["message"] if isinstance(e.value.body, dict) else str(e.value)


def test_image_tokens_count_in_usage(iclient):
    text_only = ask(iclient).usage.prompt_tokens
    with_image = ask(iclient, image_part(data_url(png_bytes(64, 48)))).usage.prompt_tokens
    # <|vision_start|> + the image's <|image_pad|> run + <|vision_end|>
    assert with_image - text_only == 2 + image_tokens(64, 48)
    two = ask(iclient, image_part(data_url(png_bytes(64, 48))), image_part(data_url(png_bytes(300, 900)))).usage
    assert two.prompt_tokens - text_only == 4 + image_tokens(64, 48) + image_tokens(300, 900)


@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "GIF"])
def test_other_formats_are_accepted(iclient, fmt):
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 200, 10)).save(buf, format=fmt)
    r = ask(iclient, image_part(data_url(buf.getvalue(), "image/" + fmt.lower())))
    assert r.usage.prompt_tokens > image_tokens(40, 30)


def test_http_and_file_sources(iclient, http_media, media_dir):
    base = ask(iclient, image_part(data_url(png_bytes(64, 48)))).usage.prompt_tokens
    assert ask(iclient, image_part(http_media + "/red.png")).usage.prompt_tokens == base
    assert ask(iclient, image_part(http_media + "/redirect")).usage.prompt_tokens == base
    assert ask(iclient, image_part(f"file://{media_dir}/red.png")).usage.prompt_tokens == base
    msg = bad_request(lambda: ask(iclient, image_part("file:///etc/hostname")))
    assert "must be a subpath of `--allowed-local-media-path" in msg
    msg = bad_request(lambda: ask(iclient, image_part(http_media + "/missing.png")))
    assert "HTTP 404" in msg


def test_slow_fetch_is_cut_at_the_timeout(iclient, http_media):
    t0 = time.time()
    msg = bad_request(lambda: ask(iclient, image_part(http_media + "/slow.png")))
    assert "timed out" in msg
    assert time.time() - t0 < 3.5


@pytest.mark.parametrize("payload,reason", [
    (png_bytes(64, 48)[:60], "truncated"),
    (b"", "empty"),
    (b"this is not an image at all", "cannot identify image file"),
])
def test_bad_images_get_a_400_that_says_why(iclient, payload, reason):
    msg = bad_request(lambda: ask(iclient, image_part(data_url(payload))))
    assert reason in msg


def test_wrong_mime_and_bad_urls(iclient):
    assert "but the bytes are a PNG image" in bad_request(lambda: ask(iclient, image_part(data_url(png_bytes(8, 8), "image/jpeg"))))
    assert "Only base64 data URLs" in bad_request(lambda: ask(iclient, image_part("data:image/png,abc")))
    assert "either a HTTP, data or file URL" in bad_request(lambda: ask(iclient, image_part("gopher://x/y.png")))


def test_limit_mm_per_prompt(iclient):
    img = image_part(data_url(png_bytes(16, 16)))
    msg = bad_request(lambda: ask(iclient, img, img, img))
    assert msg.startswith("At most 2 image(s) may be provided in one prompt.")


def test_too_many_image_tokens_for_max_model_len(iclient):
    # 2000 x 1500 -> 2016 x 1504 px -> 2961 image tokens, past --max-model-len 2048.
    big = png_bytes(2000, 1500)
    msg = bad_request(lambda: ask(iclient, image_part(data_url(big))))
    assert "maximum context length is 2048 tokens" in msg or "max_model_len" in msg or "2048" in msg


def test_no_images_when_the_limit_is_zero(make_server):
    s = make_server("--limit-mm-per-prompt", json.dumps({"image": 0}))
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    msg = bad_request(lambda: ask(c, image_part(data_url(png_bytes(16, 16)))))
    assert msg.startswith("At most 0 image(s) may be provided in one prompt.")
