"""HEAD answered wherever GET is (RFC 9110 requires both of a general-purpose server): the
request is routed and handled as a GET, and its answer sent without a body (the headers GET
would send, Content-Length too). Load balancers and `curl -I` probe /livez this way."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        # A copy: the server still sees its HEAD and sends no body.
        await self.app({**scope, "method": "GET"}, receive, headers_only)
