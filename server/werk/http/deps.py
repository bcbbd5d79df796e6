"""Request-scoped access to the process's services."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from werk.config import Settings
from werk.services.container import Services


# Async on purpose: FastAPI runs plain `def` dependencies in a thread pool, two thread hops per
# request for what is an attribute lookup.
async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


ServicesDep = Annotated[Services, Depends(_services)]
SettingsDep = Annotated[Settings, Depends(_settings)]
