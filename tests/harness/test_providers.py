"""openai/ and litellm/ providers against a real OpenAI-compatible server on loopback that
serves the embedded model; litellm's import makes no network call."""

import asyncio
import subprocess
import sys
import textwrap

import pytest

from harness.loopback import running_server
from harness.providers import load_model
from harness.providers.base import GenerateConfig, ModelError, RetryableModelError
from harness.spec import ModelSpec

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = GenerateConfig(temperature=0.0, max_tokens=12, seed=3)


@pytest.fixture(scope="module")
def served_local():
    with running_server("--model", "local/smollm2-135m") as url:
        yield url


def _generate(spec: str, base_url: str | None, config: GenerateConfig = GREEDY):
    async def go():
        model = load_model(ModelSpec.parse(spec, base_url=base_url))
        try:
            return await model.generate(MESSAGES, config)
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_openai_and_litellm_match_the_embedded_model_through_a_real_server(served_local):
    direct = _generate("local/smollm2-135m", None)
    via_openai = _generate("openai/smollm2", served_local)
    via_litellm = _generate("litellm/openai/smollm2", served_local)
    assert "Paris" in direct.text
    assert via_openai.text == direct.text == via_litellm.text
    for out in (via_openai, via_litellm):
        assert out.usage.prompt_tokens == direct.usage.prompt_tokens > 0
        assert out.usage.completion_tokens == direct.usage.completion_tokens > 0
        assert out.finish_reason == direct.finish_reason


def test_server_errors_are_classified_for_retry():
    with running_server("--echo", "--faults", "429") as url:
        with pytest.raises(RetryableModelError, match="429"):
            _generate("openai/x", url)
        with pytest.raises(RetryableModelError, match="RateLimit"):
            _generate("litellm/openai/x", url)
    with running_server("--model", "local/smollm2-135m") as url:
        # An over-long prompt is a 400: not worth retrying.
        long = GenerateConfig(max_tokens=4)

        async def go():
            model = load_model(ModelSpec.parse("openai/x", base_url=url))
            try:
                return await model.generate([{"role": "user", "content": "word " * 9000}], long)
            finally:
                await model.aclose()

        with pytest.raises(ModelError) as info:
            asyncio.run(go())
        assert not isinstance(info.value, RetryableModelError)


def test_litellm_import_makes_no_network_call_and_is_pinned():
    code = textwrap.dedent(
        """
        import socket
        attempts = []
        real_connect = socket.socket.connect
        def guard(self, address):
            attempts.append(address)
            raise OSError("network disabled in this test")
        socket.socket.connect = guard
        socket.create_connection = lambda *a, **k: guard(None, a[0])
        from harness.providers.litellm_provider import import_litellm, BANNED_VERSIONS
        lt = import_litellm()
        from importlib.metadata import version
        assert version("litellm") not in BANNED_VERSIONS
        print("ATTEMPTS", len(attempts))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert proc.returncode == 0, proc.stderr
    assert "ATTEMPTS 0" in proc.stdout
