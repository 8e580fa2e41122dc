"""The Triton LoRA kernels equal the reference and segmented ops (CPU via Triton's interpreter).

TRITON_INTERPRET must be set before triton or the kernel module is imported: `triton.jit` reads it
when the kernels are decorated. The GPU test therefore runs the compiled kernels in a child process
without it.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[kernels]')")

from preft import triton_lora  # noqa: E402
from preft.lora_ops import lora_delta, lora_delta_reference, lora_delta_segmented  # noqa: E402
from preft.triton_lora import lora_delta_triton  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def make(n: int, d_in: int, d_out: int, r: int, slots: int, idx: list[int], seed: int = 0,
         dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    A = torch.randn(slots, d_in, r, generator=g) / d_in ** 0.5
    B = torch.randn(slots, r, d_out, generator=g)
    scales = torch.rand(slots, generator=g) * 3 + 0.25
    idx_t = torch.tensor(idx, dtype=torch.int64)
    assert idx_t.shape[0] == n
    return x.to(dtype), idx_t, A.to(dtype), B.to(dtype), scales


def assert_matches_both(x, idx, A, B, scales, rtol=1e-4):
    got = lora_delta_triton(x, idx, A, B, scales)
    assert got.shape == (x.shape[0], B.shape[-1]) and got.dtype == x.dtype
    for want in (lora_delta_reference(x, idx, A, B, scales), lora_delta_segmented(x, idx, A, B, scales)):
        atol = rtol * max(1.0, float(want.abs().max()))
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
    return got


def test_kernels_are_interpreted_here():
    assert triton_lora._interpreted(), "TRITON_INTERPRET=1 was not in effect when the kernels were decorated"


def test_mixed_idx_with_unadapted_tokens():
    x, idx, A, B, s = make(9, 96, 80, 16, 3, [0, -1, 2, 1, -1, 0, 2, 2, -1])
    got = assert_matches_both(x, idx, A, B, s)
    assert torch.count_nonzero(got[idx < 0]) == 0
    assert bool((got[idx >= 0].abs().sum(dim=1) > 0).all())


def test_all_unadapted_is_exactly_zero():
    x, idx, A, B, s = make(6, 64, 48, 8, 2, [-1] * 6)
    got = lora_delta_triton(x, idx, A, B, s)
    assert got.shape == (6, 48)
    assert torch.count_nonzero(got) == 0


def test_single_adapter_equals_dense_formula():
    x, idx, A, B, s = make(5, 64, 64, 16, 1, [0] * 5, seed=1)
    got = assert_matches_both(x, idx, A, B, s)
    torch.testing.assert_close(got, s[0] * (x @ A[0] @ B[0]), rtol=1e-4, atol=1e-4 * float(got.abs().max()))


def test_several_adapters_different_scales():
    x, idx, A, B, s = make(8, 128, 64, 16, 4, [3, 0, 1, 2, 3, 1, 0, 2], seed=2)
    s = torch.tensor([0.5, 1.0, 2.0, 4.0])
    got = assert_matches_both(x, idx, A, B, s)
    assert got.shape == (8, 64)
    # Two slots holding the same weights differ only by their scale: 3.0 vs 1.0 on the same token.
    A2, B2 = A[:1].repeat(2, 1, 1), B[:1].repeat(2, 1, 1)
    two = lora_delta_triton(x[:1].repeat(2, 1), torch.tensor([0, 1]), A2, B2, torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(two[1], 3.0 * two[0], rtol=1e-5, atol=1e-5 * float(two.abs().max()))


@pytest.mark.parametrize("d_in,d_out,r", [(100, 37, 12), (576, 192, 8), (33, 130, 3), (40, 24, 80)])
def test_non_power_of_two_dims(d_in, d_out, r):
    # (576, 192, 8) is SmolLM2-135M's hidden -> kv projection; r=80 spans two shrink rank blocks.
    x, idx, A, B, s = make(5, d_in, d_out, r, 2, [1, 0, -1, 1, 0], seed=d_in)
    assert_matches_both(x, idx, A, B, s)


def test_padded_rank_equals_unpadded():
    x, idx, A, B, s = make(7, 72, 56, 12, 2, [0, 1, 1, -1, 0, 1, 0], seed=3)
    A[1, :, 5:] = 0  # slot 1 is a rank-5 adapter zero-padded to r=12
    B[1, 5:, :] = 0
    got = assert_matches_both(x, idx, A, B, s)
    rows = idx == 1
    small = s[1] * (x[rows] @ A[1, :, :5] @ B[1, :5, :])
    torch.testing.assert_close(got[rows], small, rtol=1e-4, atol=1e-4 * float(small.abs().max()))


def test_noncontiguous_inputs_and_backend_dispatch():
    x, idx, A, B, s = make(6, 64, 40, 8, 2, [0, 1, -1, 1, 0, 0], seed=4)
    x_nc = torch.randn(64, 6).t()
    x_nc.copy_(x)
    A_nc = A.transpose(1, 2).contiguous().transpose(1, 2)
    assert not x_nc.is_contiguous() and not A_nc.is_contiguous()
    got = lora_delta(x_nc, idx, A_nc, B, s, backend="triton")
    torch.testing.assert_close(got, lora_delta_reference(x, idx, A, B, s), rtol=1e-4, atol=1e-4 * 50)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-2), (torch.bfloat16, 6e-2)])
def test_half_precision(dtype, tol):
    x, idx, A, B, s = make(6, 96, 48, 16, 3, [0, 2, -1, 1, 2, 0], seed=5, dtype=dtype)
    try:
        got = lora_delta_triton(x, idx, A, B, s)
    except Exception as exc:  # the interpreter's numpy backend lacks some half types on some builds
        if triton_lora._interpreted():
            pytest.skip(f"Triton interpreter cannot run {dtype}: {exc!r}")
        raise
    assert got.dtype == dtype
    assert torch.count_nonzero(got[idx < 0]) == 0
    # The kernels keep t = x A in fp32, so compare with an fp32 computation on the same rounded inputs.
    want32 = lora_delta_reference(x.float(), idx, A.float(), B.float(), s)
    scale = float(want32.abs().max())
    torch.testing.assert_close(got.float(), want32, rtol=tol, atol=tol * scale)
    torch.testing.assert_close(got.float(), lora_delta_segmented(x, idx, A, B, s).float(),
                               rtol=2 * tol, atol=2 * tol * scale)


@pytest.mark.parametrize("case", ["idx_too_big", "idx_len", "a_d_in", "b_rank", "scales_len", "int_x"])
def test_bad_input_raises_value_error(case):
    x, idx, A, B, s = make(4, 32, 16, 8, 2, [0, 1, -1, 0])
    if case == "idx_too_big":
        idx = torch.tensor([0, 2, -1, 0])
    elif case == "idx_len":
        idx = idx[:3]
    elif case == "a_d_in":
        A = A[:, :31]
    elif case == "b_rank":
        B = B[:, :7]
    elif case == "scales_len":
        s = s[:1]
    elif case == "int_x":
        x = x.to(torch.int32)
    with pytest.raises(ValueError, match="lora_delta_triton: bad input"):
        lora_delta_triton(x, idx, A, B, s)


def test_cpu_without_interpreter_raises_runtime_error(monkeypatch):
    monkeypatch.setattr(triton_lora, "_interpreted", lambda: False)
    x, idx, A, B, s = make(2, 16, 16, 4, 1, [0, -1])
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        lora_delta_triton(x, idx, A, B, s)


def test_missing_triton_raises_runtime_error_naming_the_fix(monkeypatch):
    monkeypatch.setattr(triton_lora, "_IMPORT_ERROR", ImportError("No module named 'triton'"))
    x, idx, A, B, s = make(2, 16, 16, 4, 1, [0, -1])
    with pytest.raises(RuntimeError, match=r"pip install -e '\.\[kernels\]'"):
        lora_delta_triton(x, idx, A, B, s)


GPU_SCRIPT = textwrap.dedent("""
    import torch
    from preft.lora_ops import lora_delta_reference
    from preft.triton_lora import lora_delta_triton, _interpreted
    assert not _interpreted()
    g = torch.Generator().manual_seed(0)
    n, d_in, d_out, r, S = 512, 576, 1536, 16, 6
    x = torch.randn(n, d_in, generator=g)
    idx = torch.randint(-1, S, (n,), generator=g)
    A = torch.randn(S, d_in, r, generator=g) / d_in ** 0.5
    B = torch.randn(S, r, d_out, generator=g)
    s = torch.rand(S, generator=g) + 0.5
    want = lora_delta_reference(x.double(), idx, A.double(), B.double(), s.double())
    for dtype, tol in ((torch.float32, 1e-3), (torch.float16, 2e-2), (torch.bfloat16, 6e-2)):
        args = [t.cuda() for t in (x.to(dtype), idx, A.to(dtype), B.to(dtype), s)]
        got = lora_delta_triton(*args).double().cpu()
        scale = float(want.abs().max())
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * scale)
        assert torch.count_nonzero(got[idx < 0]) == 0
    print("gpu ok")
""")


@pytest.mark.gpu
def test_gpu_matches_reference_on_a_larger_batch():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    # This process decorated the kernels in interpreter mode, so compile them in a clean child.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", GPU_SCRIPT], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu ok" in proc.stdout
