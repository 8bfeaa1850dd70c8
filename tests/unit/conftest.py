"""Unit tests share one process: the secrets one test's configuration made mirrord remember (and hide
from then on) must not hide another test's words."""

from __future__ import annotations

import pytest

from mirrord.settings import redact


@pytest.fixture(autouse=True)
def forget_secrets(monkeypatch):
    monkeypatch.setattr(redact, "_known", set())
