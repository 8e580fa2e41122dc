"""Rendering a sanitised SVG, and what the render says about visibility.

Renders run in one worker process (`render_worker.py`: resvg, its own memory and CPU limits) that
is killed and restarted when a render runs past `timeout_s`; results are cached by content hash
(in memory, and on disk under the harness cache). An element of the scene counts as visible only
if the render shows paint (a colour unlike the background) along it: white on white, a stroke
hidden under a filled box, or anything outside the canvas does not count.
"""

from __future__ import annotations

import hashlib
import io
import math
import struct
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from environments.prograf.parse.scene import Box, InputRejected, Scene

RENDER_SIZE = 400  # pixels along the canvas's longer side
RENDER_VERSION = "resvg-py-0.5.0/1"


def cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("harness")) / "prograf-renders"


@dataclass
class RenderStats:
    renders: int = 0
    cache_hits: int = 0
    failures: int = 0
    seconds: float = 0.0


class Renderer:
    """One worker process behind a lock; thread-safe; `close()` ends the worker."""

    def __init__(self, timeout_s: float = 10.0, disk_cache: Path | None = None):
        self.timeout_s = timeout_s
        self.disk_cache = disk_cache
        self.memory: dict[str, bytes] = {}
        self.stats = RenderStats()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def _worker(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-m", "environments.prograf.check.render_worker"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return self._proc

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._proc.kill()
                self._proc.wait()
                self._proc = None

    def png(self, svg: str, width: int, height: int) -> bytes:
        """PNG bytes of the SVG at this size; InputRejected(render_error) if it fails or hangs."""
        key = hashlib.sha256(f"{RENDER_VERSION}|{width}x{height}|{svg}".encode()).hexdigest()
        if key in self.memory:
            self.stats.cache_hits += 1
            return self.memory[key]
        path = self.disk_cache / key[:2] / f"{key}.png" if self.disk_cache else None
        if path is not None and path.exists():
            self.stats.cache_hits += 1
            self.memory[key] = path.read_bytes()
            return self.memory[key]
        import time

        start = time.perf_counter()
        with self._lock:
            data = self._render_locked(svg, width, height)
        self.stats.renders += 1
        self.stats.seconds += time.perf_counter() - start
        self.memory[key] = data
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return data

    def _render_locked(self, svg: str, width: int, height: int) -> bytes:
        proc = self._worker()
        assert proc.stdin is not None and proc.stdout is not None
        job = f'{{"width": {width}, "height": {height}}}\n'.encode() + svg.encode()
        result: list[bytes] = []

        def talk() -> None:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(struct.pack(">I", len(job)) + job)
            proc.stdin.flush()
            status = proc.stdout.read(1)
            size = proc.stdout.read(4)
            if len(status) == 1 and len(size) == 4:
                result.extend([status, proc.stdout.read(struct.unpack(">I", size)[0])])

        thread = threading.Thread(target=talk, daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        if thread.is_alive() or len(result) != 2:
            hung = thread.is_alive()
            proc.kill()
            proc.wait()
            self._proc = None
            self.stats.failures += 1
            what = f"killed after {self.timeout_s:g} s" if hung else "the renderer died (memory limit?)"
            raise InputRejected(f"render failed: {what}", "render_error")
        if result[0] != b"\x00":
            self.stats.failures += 1
            raise InputRejected(f"render failed: {result[1].decode(errors='replace')}", "render_error")
        return result[1]


def prepare(root: ET.Element, canvas: Box) -> tuple[ET.Element, int, int]:
    """Pin the viewBox and pixel size, so that canvas units map to pixels exactly."""
    w, h = canvas[2] - canvas[0], canvas[3] - canvas[1]
    scale = RENDER_SIZE / max(w, h)
    width, height = max(1, round(w * scale)), max(1, round(h * scale))
    root.set("viewBox", f"{canvas[0]:g} {canvas[1]:g} {w:g} {h:g}")
    root.set("width", str(width))
    root.set("height", str(height))
    root.set("preserveAspectRatio", "none")
    return root, width, height


def painted_mask(png: bytes) -> np.ndarray:
    """True where the render differs from its background (the commonest border colour)."""
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    border = np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]])
    colours, counts = np.unique(border, axis=0, return_counts=True)
    background = colours[counts.argmax()]
    return np.asarray(np.abs(img - background).max(axis=2) > 40)


class Visibility:
    """Looks up paint along scene elements, in canvas units."""

    def __init__(self, mask: np.ndarray, canvas: Box):
        self.mask = mask
        self.canvas = canvas
        h, w = mask.shape
        self.sx = w / (canvas[2] - canvas[0])
        self.sy = h / (canvas[3] - canvas[1])

    def painted_near(self, x: float, y: float, radius: int = 2) -> bool:
        px, py = int((x - self.canvas[0]) * self.sx), int((y - self.canvas[1]) * self.sy)
        h, w = self.mask.shape
        if not (0 <= px < w and 0 <= py < h):
            return False
        return bool(self.mask[max(0, py - radius):py + radius + 1, max(0, px - radius):px + radius + 1].any())

    def share_painted(self, points: list[tuple[float, float]]) -> float:
        return sum(self.painted_near(x, y) for x, y in points) / max(1, len(points))


def filter_visible(scene: Scene, vis: Visibility, need: float = 0.6) -> None:
    """Drop what the render does not show: segments, circles and shapes with too little paint."""
    def along(x1: float, y1: float, x2: float, y2: float) -> list[tuple[float, float]]:
        return [(x1 + (x2 - x1) * t, y1 + (y2 - y1) * t) for t in np.linspace(0.1, 0.9, 9)]

    kept_segments = [s for s in scene.segments if vis.share_painted(along(s.x1, s.y1, s.x2, s.y2)) >= need]
    kept_circles = []
    for c in scene.circles:
        ring = [(c.cx + c.r * math.cos(a), c.cy + c.r * math.sin(a)) for a in np.linspace(0, 2 * math.pi, 16, endpoint=False)]
        if vis.share_painted(ring) >= need or vis.painted_near(c.cx, c.cy, radius=max(1, int(c.r * vis.sx * 0.7))):
            kept_circles.append(c)
    kept_shapes = []
    for s in scene.shapes:
        x0, y0, x1, y1 = s.box
        cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
        if s.family in ("ellipse", "circle", "other"):
            rim = [(cx + rx * math.cos(a), cy + ry * math.sin(a)) for a in np.linspace(0, 2 * math.pi, 24, endpoint=False)]
        elif s.family == "diamond":
            rim = along(x0, cy, cx, y0) + along(cx, y0, x1, cy) + along(x1, cy, cx, y1) + along(cx, y1, x0, cy)
        else:
            rim = along(x0, y0, x1, y0) + along(x1, y0, x1, y1) + along(x1, y1, x0, y1) + along(x0, y1, x0, y0)
        inner = along(cx - rx / 2, cy, cx + rx / 2, cy)
        if vis.share_painted(rim) >= need / 2 or vis.share_painted(inner) >= need:
            kept_shapes.append(s)
    dropped = (len(scene.segments) - len(kept_segments)) + (len(scene.circles) - len(kept_circles)) \
        + (len(scene.shapes) - len(kept_shapes))
    if dropped:
        scene.notes.append(f"{dropped} elements drawn but not visible in the render")
    scene.hidden += dropped
    scene.segments, scene.circles, scene.shapes = kept_segments, kept_circles, kept_shapes
