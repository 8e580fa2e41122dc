"""Hardware accounting for `qec_precision_pyramid`'s W1 decoders: bit-operations per stage, the
share of work at <= 2-bit activations, and a latency MODEL on a stated FPGA-like cost model (a
model, not a measurement: nothing here runs on an FPGA).

A stage is one layer: it reads `fan_in` activations of `in_bits` bits (the first stage reads the
detector bits, 1 bit each), has `units` outputs and 1-bit weights (32-bit for the float decoder).
Its work is fan_in x units x in_bits x weight_bits bit-operations (a binary-weight
multiply-accumulate of a b-bit input is b bit-ops). A stage is LUT-friendly when in_bits <= 2 and its weights are binary.

Latency model (ours): a fully unrolled pipeline at CLOCK_NS per cycle. A LUT stage reduces each
neuron's fan_in x in_bits input bits through a tree of LUT_INPUTS-input lookup tables, one level
per cycle: ceil(log_6(fan_in x in_bits)) cycles. A wider stage is a binary adder tree of its
fan-in, one level per cycle, plus one cycle for the multiply: ceil(log2 fan_in) + 1. Every stage
adds one cycle for its activation (a threshold compare against 2^bits - 1 levels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CLOCK_NS = 4.0  # a 250 MHz fabric clock (ours)
LUT_INPUTS = 6  # a LUT6
LOW_BITS = 2  # "LUT-friendly": activations of at most 2 bits


@dataclass(frozen=True)
class Stage:
    fan_in: int
    units: int
    in_bits: int
    weight_bits: int = 1

    @property
    def bit_ops(self) -> int:
        return self.fan_in * self.units * self.in_bits * self.weight_bits

    @property
    def lut_friendly(self) -> bool:
        return self.in_bits <= LOW_BITS and self.weight_bits == 1

    @property
    def cycles(self) -> int:
        if self.lut_friendly:
            tree = max(1, math.ceil(math.log(self.fan_in * self.in_bits, LUT_INPUTS) - 1e-12))
        else:
            tree = max(1, math.ceil(math.log2(self.fan_in) - 1e-12)) + 1
        return tree + 1


def stages(inputs: int, hidden: tuple[int, ...], outputs: int, bits: tuple[int | None, ...]) -> list[Stage]:
    """The stages of an MLP inputs-hidden...-outputs whose hidden activations have `bits` (None:
    float, counted as 32-bit activations and 32-bit weights)."""
    if len(bits) != len(hidden):
        raise ValueError(f"activation bits {bits}: give one per hidden layer ({len(hidden)})")
    if inputs < 1 or outputs < 1 or min(hidden, default=1) < 1:
        raise ValueError(f"layer sizes {inputs}, {hidden}, {outputs}: every size must be >= 1")
    floating = any(b is None for b in bits)
    weight_bits = 32 if floating else 1
    sizes = (inputs, *hidden, outputs)
    in_bits = (1, *(32 if b is None else b for b in bits))
    return [Stage(sizes[i], sizes[i + 1], in_bits[i], weight_bits) for i in range(len(sizes) - 1)]


def low_bit_share(layers: list[Stage]) -> float:
    """The share of bit-operations in stages that read <= 2-bit activations."""
    total = sum(s.bit_ops for s in layers)
    return sum(s.bit_ops for s in layers if s.lut_friendly) / total


def latency_ns(layers: list[Stage]) -> float:
    """The modelled pipeline latency of one shot (not a measurement)."""
    return CLOCK_NS * sum(s.cycles for s in layers)
