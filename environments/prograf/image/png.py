"""A generator's image, read as data: PNG bytes only, checked before they are decoded.

An image-only generator (text-to-image) answers with pixels. They are model output, so they are
never taken as a path or a URL, and their size is read from the PNG header before any pixel is
decoded: a decompression bomb (a small file that claims a huge canvas) is refused without
allocating it. Anything else -- not bytes, not a PNG, truncated, too large -- is one
`ImageRejected` naming what was wrong and what to send instead.
"""

from __future__ import annotations

import io
import struct

import numpy as np

from environments.prograf.parse.scene import InputRejected

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_BYTES = 32 << 20  # a 4096 x 4096 RGBA PNG without compression is 64 MiB; real answers are far smaller
MAX_SIDE = 4096  # pixels along either side
MAX_PIXELS = 4096 * 4096


class ImageRejected(InputRejected):
    """An image we will not decode; recorded as `rejected_input` on every point."""


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which a PNG must start with."""
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise ImageRejected("the image is a truncated PNG (no IHDR header); send the whole PNG file's bytes")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def decode_png(data: object, max_side: int = MAX_SIDE) -> np.ndarray:
    """RGB pixels (height x width x 3, uint8) of PNG bytes, after the size checks."""
    if not isinstance(data, (bytes, bytearray)):
        raise ImageRejected(f"the image must be PNG bytes, got {type(data).__name__} (decode base64 first; "
                            "a path or URL is never opened)")
    data = bytes(data)
    if len(data) > MAX_BYTES:
        raise ImageRejected(f"the image is {len(data)} bytes, over the limit of {MAX_BYTES}; send a smaller PNG")
    if not data.startswith(PNG_SIGNATURE):
        raise ImageRejected("the image is not a PNG (no PNG signature); send PNG bytes")
    width, height = png_size(data)
    if not (1 <= width <= max_side and 1 <= height <= max_side) or width * height > MAX_PIXELS:
        raise ImageRejected(f"the image is {width} x {height} pixels, over the limit of {max_side} x {max_side}; "
                            "send a smaller PNG")
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as img:
            img.load()
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ImageRejected(f"the PNG could not be decoded ({type(exc).__name__}: {exc}); send a valid PNG") from None
