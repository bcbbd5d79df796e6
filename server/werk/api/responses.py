"""JSON answers, encoded as every answer writes it (services.views.dumps)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from werk.services.views import dumps


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)
