"""The committed OpenAPI document is rendered from the app, never written by hand."""

from __future__ import annotations

import json

from werk.app import create_app
from werk.config import Settings


def render() -> str:
    app = create_app(Settings(database_url="postgresql://unused/openapi"))
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"
