"""Security headers on every response, refusals included: the page's content policy (no framing, same-origin
scripts only), no MIME sniffing, no referrer. Swagger UI (/docs, /redoc) loads its script from a CDN and runs
an inline one, so it gets every header but the script policy."""

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
               "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
DOCS_POLICY = "frame-ancestors 'none'; object-src 'none'; base-uri 'none'"
COMMON = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = DOCS_POLICY if scope["path"] in ("/docs", "/redoc", "/docs/oauth2-redirect") else PAGE_POLICY

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", policy)
                for name, value in COMMON.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)
