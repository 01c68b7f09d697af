"""Images through the engine with the official openai client (issue 19, parts 3-4): the demo model's
vision tower encodes the pixels and its rows replace the <|image_pad|> embeddings, so the answer
depends on the image; the prefix cache hits the same image in a later request and misses another
image of the same size (whose prompt has the same token ids)."""
import base64
import io

import openai
import pytest
from PIL import Image


def png_url(colour, size=(64, 48)):
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def mm_server(make_server):
    return make_server("--enable-prompt-tokens-details", "--limit-mm-per-prompt", '{"image": 2}')


@pytest.fixture()
def mclient(mm_server):
    return openai.OpenAI(base_url=mm_server.url + "/v1", api_key="unused", max_retries=0)


def ask(client, colour, text="What colour is this?"):
    return client.chat.completions.create(
        model=client.models.list().data[0].id, max_tokens=4, temperature=0, logprobs=True, top_logprobs=5,
        messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": png_url(colour)}},
                                               {"type": "text", "text": text}]}])


def first_logprobs(r):
    return [(t.token, round(t.logprob, 4)) for t in r.choices[0].logprobs.content[0].top_logprobs]


def test_the_answer_depends_on_the_image(mclient):
    red, blue = ask(mclient, (220, 20, 30)), ask(mclient, (20, 30, 220))
    assert red.usage.prompt_tokens == blue.usage.prompt_tokens  # same tokens, other pixels
    assert first_logprobs(red) != first_logprobs(blue)
    # Deterministic: the same image again gives the same distribution.
    assert first_logprobs(ask(mclient, (220, 20, 30))) == first_logprobs(red)


def test_prefix_cache_hits_the_same_image_only(mclient):
    text = "Describe the picture in one word, please, and nothing else at all."
    first = ask(mclient, (10, 200, 10), text)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    again = ask(mclient, (10, 200, 10), text)
    assert again.usage.prompt_tokens_details.cached_tokens > 0
    assert again.choices[0].message.content == first.choices[0].message.content
    other = ask(mclient, (200, 200, 10), text)  # same size: the same token ids
    assert other.usage.prompt_tokens == first.usage.prompt_tokens
    assert other.usage.prompt_tokens_details.cached_tokens == 0


def test_images_refused_when_the_tower_is_not_loaded(make_server):
    s = make_server("--limit-mm-per-prompt", '{"image": 0}')
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError):
        ask(c, (1, 2, 3))
    # Text still works.
    r = c.chat.completions.create(model=c.models.list().data[0].id, max_tokens=2,
                                  messages=[{"role": "user", "content": "hi"}])
    assert r.usage.completion_tokens >= 1
