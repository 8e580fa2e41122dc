"""Secrets never reach a record: API keys from the environment and passwords in URLs are masked
in everything the manifest stores about how a run was started."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

_SECRET_ENV = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_PASSWORD)$")
MASK = "***"


def _secret_values() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8]


def redact_url(url: str | None) -> str | None:
    if not url:
        return url
    if "," in url:  # several replicas (`--base-url URL1,URL2`): each one redacted
        return ",".join(redact_url(u.strip()) or "" for u in url.split(","))
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username}:{MASK}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        url = urlunsplit(parts._replace(netloc=netloc))
    return redact_text(url)


def redact_text(text: str) -> str:
    for secret in _secret_values():
        text = text.replace(secret, MASK)
    return text
