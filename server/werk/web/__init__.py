"""The dashboard: server-rendered pages (Jinja2, autoescaped) over the same services as the API."""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from werk.config import Settings
from werk.web.routes import router
from werk.web.security import ForwardedPrefix, install_handlers


def install(app: FastAPI, settings: Settings) -> None:
    static = resources.files("werk.web").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    app.include_router(router)
    install_handlers(app)
    app.add_middleware(ForwardedPrefix, default=settings.root_path)
