"""Fixtures for Faktory wire-protocol tests: the in-process app with its FWP listener on a free
port."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.faktory.fwp import free_port


@dataclass
class FwpApp:
    """The in-process app (manual clock, maintenance by hand) and its FWP port."""

    api: Any
    port: int

    @property
    def http(self) -> Any:
        return self.api.http

    @property
    def services(self) -> Any:
        return self.api.services

    @property
    def clock(self) -> Any:
        return self.api.clock


@pytest.fixture
async def make_fwp(make_api: Callable[..., Any]) -> Callable[..., Any]:
    async def make(**overrides: Any) -> FwpApp:
        settings: dict[str, Any] = {"faktory_port": free_port(), "faktory_fetch_wait": 0.3}
        settings.update(overrides)
        api = await make_api(**settings)
        return FwpApp(api=api, port=settings["faktory_port"])

    return make


@pytest.fixture
async def fwp(make_fwp: Callable[..., Any]) -> FwpApp:
    app: FwpApp = await make_fwp()
    return app
