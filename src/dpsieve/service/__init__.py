"""The HTTP service: ``create_app(settings)`` builds a FastAPI app (nothing at import time)."""

from __future__ import annotations

from dpsieve.service.app import create_app
from dpsieve.service.settings import Settings

__all__ = ["Settings", "create_app"]
