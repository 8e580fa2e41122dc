"""The rasteriser's worker process: reads SVG jobs on stdin, writes PNGs on stdout.

It limits its own address space and CPU time before it reads anything, imports nothing but
resvg, and is killed by its parent when a job runs past the time limit. Protocol, per job:
in `<4-byte length><JSON header {"width", "height"}>\\n<svg text>`, out `<1 status byte><4-byte
length><png bytes or an error message>`.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import sys

MEMORY_LIMIT = int(os.environ.get("PROGRAF_RENDER_MEMORY", str(1 << 30)))


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    import resvg_py

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            return
        (n,) = struct.unpack(">I", head)
        header, _, svg = stdin.read(n).partition(b"\n")
        size = json.loads(header)
        try:
            png = bytes(resvg_py.svg_to_bytes(svg_string=svg.decode("utf-8"), width=size["width"],
                                              height=size["height"], background="#ffffff"))
            stdout.write(b"\x00" + struct.pack(">I", len(png)) + png)
        except (ValueError, MemoryError, OSError) as exc:
            message = f"{type(exc).__name__}: {exc}".encode()[:2000]
            stdout.write(b"\x01" + struct.pack(">I", len(message)) + message)
        stdout.flush()


if __name__ == "__main__":
    main()
