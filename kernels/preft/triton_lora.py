"""Multi-adapter LoRA delta `s_i (x A_i) B_i` as two Triton kernels (the BGMV pattern of serving engines).

Same contract as `lora_ops.lora_delta_reference` (shapes are documented in `lora_ops`): x [N, d_in],
idx [N] (negative = no adapter), A [S, d_in, r], B [S, r, d_out], scales [S]; returns [N, d_out] in x.dtype.

- `_shrink_kernel`, grid (N, cdiv(r, BLOCK_R)): one program per token and rank block gathers its
  token's slot of A and computes t = x A_slot into a float32 [N, r] buffer, walking d_in in BLOCK_K
  chunks. The intermediate stays fp32 so fp16/bf16 inputs round only once, at the output.
- `_expand_kernel`, grid (N, cdiv(d_out, BLOCK_N)): one program per token and output block computes
  y = scales[slot] * (t B_slot) and writes it in the output dtype.

Every token may use a different adapter, so a tile of tokens does not share one weight matrix and
`tl.dot` (which needs a shared [K, N] operand and every dim >= 16) does not apply without first
grouping tokens by adapter (SGMV). The products are therefore per-token broadcasts reduced with
`tl.sum`; at decode-sized batches this op is bound by reading A and B, not by arithmetic, so the
lost tensor-core throughput costs little. Tokens without an adapter mask off their weight loads,
so they read no adapter memory and write zeros.

On CPU tensors the kernels run only under Triton's interpreter: TRITON_INTERPRET=1 must be set
before this module (and triton) is first imported, because `triton.jit` reads it at decoration.
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # the module must import without the `kernels` extra
    triton = None
    tl = None
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

if triton is not None:

    @triton.jit
    def _shrink_kernel(x_ptr, idx_ptr, a_ptr, t_ptr, d_in, rank,
                       stride_xn, stride_xk, stride_as, stride_ak, stride_ar, stride_tn,
                       BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):
        tok = tl.program_id(0).to(tl.int64)  # int64: N * stride can pass 2**31 on big batches
        offs_r = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        r_mask = offs_r < rank
        slot = tl.load(idx_ptr + tok)
        # An unadapted token gets an empty K range, so every A load is masked off and reads nothing.
        # (A limit, not `mask & active`: the interpreter mistypes a vector mask and-ed with a scalar.)
        k_lim = tl.where(slot >= 0, d_in, 0)
        slot = tl.maximum(slot, 0).to(tl.int64)  # keeps the (unused) addresses of unadapted tokens in bounds
        acc = tl.zeros((BLOCK_R,), dtype=tl.float32)
        x_row = x_ptr + tok * stride_xn
        a_slot = a_ptr + slot * stride_as
        for k0 in range(0, d_in, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            k_mask = offs_k < k_lim
            xv = tl.load(x_row + offs_k * stride_xk, mask=k_mask, other=0.0).to(tl.float32)
            a = tl.load(a_slot + offs_k[:, None] * stride_ak + offs_r[None, :] * stride_ar,
                        mask=k_mask[:, None] & r_mask[None, :], other=0.0).to(tl.float32)
            acc += tl.sum(xv[:, None] * a, axis=0)
        tl.store(t_ptr + tok * stride_tn + offs_r, acc, mask=r_mask)

    @triton.jit
    def _expand_kernel(t_ptr, idx_ptr, b_ptr, scale_ptr, out_ptr, rank, d_out,
                       stride_tn, stride_bs, stride_br, stride_bn, stride_on, stride_om,
                       BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
        tok = tl.program_id(0).to(tl.int64)
        offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        n_mask = offs_n < d_out
        slot = tl.load(idx_ptr + tok)
        active = slot >= 0
        slot = tl.maximum(slot, 0).to(tl.int64)
        offs_r = tl.arange(0, BLOCK_R)
        r_mask = offs_r < tl.where(active, rank, 0)
        tv = tl.load(t_ptr + tok * stride_tn + offs_r, mask=r_mask, other=0.0)
        b = tl.load(b_ptr + slot * stride_bs + offs_r[:, None] * stride_br + offs_n[None, :] * stride_bn,
                    mask=r_mask[:, None] & n_mask[None, :], other=0.0).to(tl.float32)
        scale = tl.where(active, tl.load(scale_ptr + slot), 0.0)  # 0, not 0 * scale: scale may be inf
        y = tl.sum(tv[:, None] * b, axis=0) * scale
        tl.store(out_ptr + tok * stride_on + offs_n * stride_om, y.to(out_ptr.dtype.element_ty), mask=n_mask)

    @triton.jit
    def _sgmv_shrink_kernel(x_ptr, seg_start_ptr, seg_len_ptr, seg_slot_ptr, a_ptr, t_ptr, d_in, rank,
                            stride_xn, stride_xk, stride_as, stride_ak, stride_ar, stride_tn,
                            BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):
        # One program: BLOCK_M rows of one segment (consecutive tokens of one adapter). They share
        # the segment's A, so t = x A is a tl.dot tile (tensor cores on a GPU), kept in fp32.
        seg = tl.program_id(0)
        start = tl.load(seg_start_ptr + seg).to(tl.int64)
        length = tl.load(seg_len_ptr + seg)
        slot = tl.load(seg_slot_ptr + seg).to(tl.int64)
        offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
        m_mask = offs_m < length
        offs_r = tl.arange(0, BLOCK_R)
        r_mask = offs_r < rank
        rows = start + offs_m
        t = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
        for k0 in range(0, d_in, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            k_mask = offs_k < d_in
            xt = tl.load(x_ptr + rows[:, None] * stride_xn + offs_k[None, :] * stride_xk,
                         mask=m_mask[:, None] & k_mask[None, :], other=0.0).to(tl.float32)
            at = tl.load(a_ptr + slot * stride_as + offs_k[:, None] * stride_ak + offs_r[None, :] * stride_ar,
                         mask=k_mask[:, None] & r_mask[None, :], other=0.0).to(tl.float32)
            t += tl.dot(xt, at)
        tl.store(t_ptr + rows[:, None] * stride_tn + offs_r[None, :], t, mask=m_mask[:, None] & r_mask[None, :])

    @triton.jit
    def _sgmv_expand_kernel(t_ptr, seg_start_ptr, seg_len_ptr, seg_slot_ptr, b_ptr, scale_ptr, out_ptr, rank, d_out,
                            stride_tn, stride_bs, stride_br, stride_bn, stride_on, stride_om,
                            BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
        # y = scale * t B for BLOCK_M rows of one segment and BLOCK_N output columns (tl.dot tile).
        seg = tl.program_id(0)
        offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        start = tl.load(seg_start_ptr + seg).to(tl.int64)
        length = tl.load(seg_len_ptr + seg)
        slot = tl.load(seg_slot_ptr + seg).to(tl.int64)
        offs_m = tl.program_id(2) * BLOCK_M + tl.arange(0, BLOCK_M)
        m_mask = offs_m < length
        offs_r = tl.arange(0, BLOCK_R)
        r_mask = offs_r < rank
        n_mask = offs_n < d_out
        rows = start + offs_m
        tt = tl.load(t_ptr + rows[:, None] * stride_tn + offs_r[None, :], mask=m_mask[:, None] & r_mask[None, :],
                     other=0.0)
        bt = tl.load(b_ptr + slot * stride_bs + offs_r[:, None] * stride_br + offs_n[None, :] * stride_bn,
                     mask=r_mask[:, None] & n_mask[None, :], other=0.0).to(tl.float32)
        y = tl.dot(tt, bt) * tl.load(scale_ptr + slot)
        tl.store(out_ptr + rows[:, None] * stride_on + offs_n[None, :] * stride_om, y.to(out_ptr.dtype.element_ty),
                 mask=m_mask[:, None] & n_mask[None, :])


def _interpreted() -> bool:
    """Whether the kernels were decorated under TRITON_INTERPRET=1 (the env var alone can lie:
    it only counts if it was set when this module was imported)."""
    return type(_shrink_kernel).__name__ == "InterpretedFunction"


def _check(x: torch.Tensor, idx: torch.Tensor, A: torch.Tensor, B: torch.Tensor, scales: torch.Tensor) -> None:
    problems = []
    if x.dim() != 2 or A.dim() != 3 or B.dim() != 3 or idx.dim() != 1 or scales.dim() != 1:
        problems.append(f"ranks: x {tuple(x.shape)} (want 2-D), idx {tuple(idx.shape)} (1-D), "
                        f"A {tuple(A.shape)} (3-D), B {tuple(B.shape)} (3-D), scales {tuple(scales.shape)} (1-D)")
    else:
        n, d_in = x.shape
        s, a_in, r = A.shape
        if idx.shape[0] != n:
            problems.append(f"idx has {idx.shape[0]} entries for {n} tokens")
        if a_in != d_in:
            problems.append(f"A is [S, {a_in}, r] but x has d_in={d_in}")
        if B.shape[0] != s or B.shape[1] != r:
            problems.append(f"B {tuple(B.shape)} does not match A's [S={s}, r={r}, d_out]")
        if scales.shape[0] != s:
            problems.append(f"scales has {scales.shape[0]} entries for S={s} slots")
        if not problems and n > 0:
            top = int(idx.max())
            if top >= s:
                problems.append(f"idx holds slot {top} but only S={s} slots are resident")
    if idx.dtype not in (torch.int64, torch.int32):
        problems.append(f"idx must be int64 or int32, got {idx.dtype}")
    for name, t in (("x", x), ("A", A), ("B", B)):
        if t.dtype not in _FLOAT_DTYPES:
            problems.append(f"{name} must be float32, float16 or bfloat16, got {t.dtype}")
    devices = {t.device for t in (x, idx, A, B, scales)}
    if len(devices) > 1:
        problems.append(f"tensors are on different devices: {sorted(map(str, devices))}")
    if problems:
        raise ValueError("lora_delta_triton: bad input: " + "; ".join(problems))


def _ready(x: torch.Tensor, idx: torch.Tensor, A: torch.Tensor, B: torch.Tensor, scales: torch.Tensor) -> None:
    """What both kernel entry points need before a launch: triton, valid inputs, and a GPU (or the
    interpreter for CPU tensors); one clear error otherwise."""
    if _IMPORT_ERROR is not None:
        raise RuntimeError("the Triton LoRA backend needs triton, which is not installed: "
                           "run `pip install -e '.[kernels]'` (or use backend='segmented')") from _IMPORT_ERROR
    _check(x, idx, A, B, scales)
    if x.device.type == "cpu" and not _interpreted():
        raise RuntimeError("Triton kernels need a GPU; to run them on CPU tensors set TRITON_INTERPRET=1 "
                           "before triton and preft.triton_lora are first imported")


def lora_delta_triton(x: torch.Tensor, idx: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                      scales: torch.Tensor) -> torch.Tensor:
    """The LoRA delta `s_i (x A_i) B_i` per token (zero rows where idx < 0), via shrink + expand kernels."""
    _ready(x, idx, A, B, scales)
    n, d_in = x.shape
    r, d_out = B.shape[1], B.shape[2]
    out = torch.empty(n, d_out, dtype=x.dtype, device=x.device)
    if n == 0 or d_out == 0:
        return out
    if r == 0 or A.shape[0] == 0:  # no slots means every idx is -1 (checked above)
        return out.zero_()
    idx = idx.contiguous()
    scales32 = scales.to(torch.float32).contiguous()
    t = torch.empty(n, r, dtype=torch.float32, device=x.device)

    block_r_shrink = min(triton.next_power_of_2(r), 64)
    block_k = 64 if block_r_shrink <= 32 else 32  # keeps the [BLOCK_K, BLOCK_R] tile at <= 2K values
    _shrink_kernel[(n, triton.cdiv(r, block_r_shrink))](
        x, idx, A, t, d_in, r,
        x.stride(0), x.stride(1), A.stride(0), A.stride(1), A.stride(2), t.stride(0),
        BLOCK_K=block_k, BLOCK_R=block_r_shrink)

    # The expand program holds the token's whole rank row, so BLOCK_R covers r; cap the tile size
    # by shrinking BLOCK_N for large ranks.
    block_r = triton.next_power_of_2(r)
    block_n = max(16, min(128, 4096 // block_r))
    _expand_kernel[(n, triton.cdiv(d_out, block_n))](
        t, idx, B, scales32, out, r, d_out,
        t.stride(0), B.stride(0), B.stride(1), B.stride(2), out.stride(0), out.stride(1),
        BLOCK_R=block_r, BLOCK_N=block_n)
    return out


def lora_delta_sgmv(x: torch.Tensor, idx: torch.Tensor, A: torch.Tensor, B: torch.Tensor, scales: torch.Tensor,
                    runs: list[tuple[int, int, int]]) -> torch.Tensor:
    """The same delta by segments (SGMV): one kernel over the runs of consecutive tokens that share an
    adapter (a prefill prompt is one run). `runs` = `lora_ops.adapter_runs(idx)` (the caller has them:
    the model computes them once per forward). Tokens outside every run (idx < 0) get zero rows."""
    _ready(x, idx, A, B, scales)
    n, d_in = x.shape
    r, d_out = B.shape[1], B.shape[2]
    out = torch.zeros(n, d_out, dtype=x.dtype, device=x.device)
    if not runs or r == 0 or d_out == 0:
        return out
    meta = torch.tensor([[a, b - a, slot] for a, b, slot in runs], dtype=torch.int32).T.contiguous().to(x.device)
    longest = max(b - a for a, b, _ in runs)
    block_m = 16 if longest <= 16 else 64
    block_r = max(16, triton.next_power_of_2(r))  # tl.dot needs every tile dim >= 16; padding is masked
    block_n = 64
    t = torch.empty(n, block_r, dtype=torch.float32, device=x.device)
    m_blocks = triton.cdiv(longest, block_m)
    _sgmv_shrink_kernel[(len(runs), m_blocks)](
        x, meta[0], meta[1], meta[2], A, t, d_in, r,
        x.stride(0), x.stride(1), A.stride(0), A.stride(1), A.stride(2), t.stride(0),
        BLOCK_M=block_m, BLOCK_K=32, BLOCK_R=block_r)
    _sgmv_expand_kernel[(len(runs), triton.cdiv(d_out, block_n), m_blocks)](
        t, meta[0], meta[1], meta[2], B, scales.to(torch.float32).contiguous(), out, r, d_out,
        t.stride(0), B.stride(0), B.stride(1), B.stride(2), out.stride(0), out.stride(1),
        BLOCK_M=block_m, BLOCK_R=block_r, BLOCK_N=block_n)
    return out
