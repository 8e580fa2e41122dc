"""vLLM on its CPU build (marker `vllm`): run with `make test-vllm`, in `.venv-vllm`.

One in-process engine for the module (startup ~30-50 s), one OpenAI-compatible vLLM server.
In the default environment (no vllm) the module is skipped, and the provider's install hint is
checked instead.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import httpx
import pytest

from harness.errors import HarnessError
from harness.providers import GenerateConfig, load_model
from harness.providers.vllm_provider import vllm_available
from harness.spec import ModelSpec
from tests.conftest import REPO

pytestmark = pytest.mark.vllm

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
QUESTIONS = [FRANCE, [{"role": "user", "content": "Name three fruits."}],
             [{"role": "user", "content": "Write one sentence about the sea."}]]


def test_without_vllm_the_spec_is_one_clear_error():
    if vllm_available():
        pytest.skip("vllm is installed here")
    with pytest.raises(HarnessError, match="make vllm-install"):
        load_model(ModelSpec.parse("vllm/smollm2-135m"))


needs_vllm = pytest.mark.skipif(not vllm_available(), reason="vllm not installed: `make vllm-install; make test-vllm`")


@pytest.fixture(scope="module")
def engine(loop):
    model = load_model(ModelSpec.parse("vllm/smollm2-135m"))
    yield model
    loop.run_until_complete(model.aclose())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_vllm
def test_greedy_generation_equals_the_embedded_engine(engine, loop):
    """Same weights, same prompt ids: vLLM's greedy text equals the PreFT engine's (base mode)."""
    from kernels.preft.provider import LocalModel

    config = GenerateConfig(max_tokens=24)
    async def together():
        return await asyncio.gather(*[engine.generate(q, config) for q in QUESTIONS])

    got = loop.run_until_complete(together())
    local = LocalModel()
    want = [asyncio.run(local.generate(q, config)) for q in QUESTIONS]
    for g, w in zip(got, want):
        assert g.text == w.text
        assert g.usage.prompt_tokens == w.usage.prompt_tokens and g.usage.completion_tokens > 0
    assert "Paris" in got[0].text


@needs_vllm
def test_seeded_sampling_is_reproducible(engine, loop):
    sampled = GenerateConfig(max_tokens=16, temperature=1.0, seed=5)
    a = loop.run_until_complete(engine.generate(QUESTIONS[2], sampled))
    b = loop.run_until_complete(engine.generate(QUESTIONS[2], sampled))
    c = loop.run_until_complete(engine.generate(QUESTIONS[2], sampled.merged(seed=6)))
    assert a.text == b.text and a.text != c.text
    assert loop.run_until_complete(engine.generate(FRANCE, GenerateConfig(max_tokens=3))).finish_reason == "length"


@needs_vllm
def test_served_model_round_trip_through_the_openai_provider(engine, loop):
    """`harness serve --model vllm/...` starts vLLM's server on loopback; `openai/<name>` with
    --base-url gets the same greedy text as the in-process engine."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--model", "vllm/smollm2-135m",
                               "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "vLLM server did not come up in 240 s"
            time.sleep(2)
        client = load_model(ModelSpec.parse("openai/smollm2-135m", base_url=base))
        config = GenerateConfig(max_tokens=24)
        served = asyncio.run(client.generate(FRANCE, config))
        direct = loop.run_until_complete(engine.generate(FRANCE, config))
        assert served.text == direct.text
        assert served.usage.prompt_tokens == direct.usage.prompt_tokens
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
