"""Numbers and transforms of SVG: lengths as written, `transform=` lists composed into one matrix.
Shared by the SVG parser (svg.py) and its marker reading (svg_marker.py)."""

from __future__ import annotations

import math
import re
from functools import lru_cache

from environments.prograf.parse.svg_path import NUMBER

Matrix = tuple[float, float, float, float, float, float]  # a b c d e f, as SVG's matrix()
Point = tuple[float, float]
IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)

def num(value: str | None, default: float = 0.0) -> float:
    if value is None:
        return default
    n = number_or_none(value)
    return default if n is None else n


@lru_cache(maxsize=4096)  # the same few numbers ("0", "2", "16") are read again and again
def number_or_none(value: str) -> float | None:
    m = NUMBER.match(value.strip())
    return float(m.group()) if m else None


def numbers(value: str | None) -> list[float]:
    return [float(x) for x in NUMBER.findall(value or "")]


def multiply(m: Matrix, n: Matrix) -> Matrix:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + c * b2, b * a2 + d * b2, a * c2 + c * d2, b * c2 + d * d2, a * e2 + c * f2 + e, b * e2 + d * f2 + f)


TRANSFORM = re.compile(r"(matrix|translate|scale|rotate|skewX|skewY)\s*\(([^)]*)\)")


def parse_transform(text: str | None) -> Matrix:
    m = IDENTITY
    if not text:
        return m
    for op, args in TRANSFORM.findall(text):
        v = numbers(args)
        if op == "matrix" and len(v) == 6:
            t: Matrix = (v[0], v[1], v[2], v[3], v[4], v[5])
        elif op == "translate" and v:
            t = (1, 0, 0, 1, v[0], v[1] if len(v) > 1 else 0.0)
        elif op == "scale" and v:
            t = (v[0], 0, 0, v[1] if len(v) > 1 else v[0], 0, 0)
        elif op == "rotate" and v:
            r = math.radians(v[0])
            t = (math.cos(r), math.sin(r), -math.sin(r), math.cos(r), 0, 0)
            if len(v) == 3:
                t = multiply(multiply((1, 0, 0, 1, v[1], v[2]), t), (1, 0, 0, 1, -v[1], -v[2]))
        elif op == "skewX" and v:
            t = (1, 0, math.tan(math.radians(v[0])), 1, 0, 0)
        elif op == "skewY" and v:
            t = (1, math.tan(math.radians(v[0])), 0, 1, 0, 0)
        else:
            continue
        m = multiply(m, t)
    return m


def apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    return (m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])


def scale_of(m: Matrix) -> float:
    return math.sqrt(abs(m[0] * m[3] - m[1] * m[2])) or 1.0
