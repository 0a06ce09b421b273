"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (test helper).

Headless Chromium keeps windows at least 500 px wide, so a phone width needs device
emulation (Emulation.setDeviceMetricsOverride). The pipe transport (JSON messages ending in
NUL on file descriptors 3 and 4 of the browser) needs no websocket library.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

__all__ = ["Browser"]


class Browser:
    """One headless Chromium; :meth:`render` loads a URL at a given viewport."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def child() -> None:  # the browser reads commands on fd 3, writes replies on fd 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=child, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._id = 0
        self._buf = b""

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    result: dict[str, Any] = reply.get("result", {})
                    return result
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed the pipe")
            self._buf += chunk
        raise TimeoutError(method)

    def render(self, url: str, width: int, height: int, *, mobile: bool,
               ready: str, screenshot: Path) -> dict[str, Any]:
        """Load ``url`` at ``width`` x ``height`` (CSS px), wait until the JS expression
        ``ready`` is truthy, save a full-page PNG; return the DOM and the page's widths."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}, sid)
        self.call("Page.enable", {}, sid)
        self.call("Page.navigate", {"url": url}, sid)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            v = self.call("Runtime.evaluate", {"expression": ready, "returnByValue": True}, sid)
            if v.get("result", {}).get("value"):
                break
            time.sleep(0.2)
        else:
            raise TimeoutError(f"page not ready: {ready}")

        def js(expr: str) -> Any:
            return self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                             sid)["result"].get("value")

        size = self.call("Page.getLayoutMetrics", {}, sid)["cssContentSize"]
        shot = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1}},
            sid)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        out = {"dom": js("document.documentElement.outerHTML"),
               "inner_width": js("window.innerWidth"),
               "scroll_width": js("document.documentElement.scrollWidth")}
        self.call("Target.closeTarget", {"targetId": target})
        return out

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
