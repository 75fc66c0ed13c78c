"""The ASGI application (Starlette): routes, keys, caps and OpenAI's error JSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from beamfilter_core import Decision, Kernel, mask_credentials
from beamfilter_core.errors import GatewayError

from ._auth import KeyRing, basic_password, bearer
from ._gateway import Gateway, error_for, listing_version
from ._options import ServerOptions
from ._page import form_token, inbox_page, message_page
from ._wire import error_body, parse_chat_request

__all__ = ["create_app"]

logger = logging.getLogger("beamfilter.server")
Handler = Callable[[Request], Awaitable[Response]]


def _error(error: GatewayError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(error_body(error), status_code=error.status, headers=headers)


def _sse(item: dict[str, Any] | str) -> bytes:
    if isinstance(item, str):
        return f": {item}\n\n".encode()
    return b"data: " + json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


async def _body(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    too_large = GatewayError(
        f"The request body is larger than max_body_bytes={limit}.", status=413, code="request_too_large"
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise too_large
        parts.append(part)
    try:
        return json.loads(b"".join(parts))
    except (ValueError, RecursionError):
        msg = "The request body is not valid JSON."
        raise GatewayError(msg, status=400, code="invalid_json") from None


class _Routes:
    """The handlers, bound to one gateway and its key rings."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        options = gateway.options
        self.api_keys = KeyRing(options.api_keys)
        self.reviewer_keys = KeyRing(options.reviewer_keys)

    # -- authentication -----------------------------------------------------------------

    def _client(self, request: Request) -> str | None:
        """The id of the client's key (None on a gateway without keys); 401 without a key."""
        if self.api_keys.open:
            return None
        client = self.api_keys.identify(bearer(request.headers.get("authorization")))
        if client is None:
            msg = "Incorrect or missing API key; send Authorization: Bearer <key>."
            raise GatewayError(msg, status=401, code="invalid_api_key")
        return client

    def _reviewer(self, request: Request) -> tuple[str, str] | None:
        """``(name, key)`` of the reviewer, or None when the request does not carry a reviewer key."""
        header = request.headers.get("authorization")
        found = basic_password(header)
        name, key = found if found is not None else ("api", bearer(header) or "")
        if self.reviewer_keys.open:
            return (name or "reviewer")[:64], key
        if found is None and bearer(header) is None:
            return None
        if not self.reviewer_keys.accepts(key):
            return None
        return (name or "reviewer")[:64], key

    def _ask_login(self) -> Response:
        return HTMLResponse(
            message_page("Sign in", "The inbox needs a reviewer key (any name, the key as password)."),
            status_code=401,
            headers={"WWW-Authenticate": 'Basic realm="beamfilter inbox", charset="UTF-8"'},
        )

    # -- the OpenAI wire ----------------------------------------------------------------

    async def models(self, request: Request) -> Response:
        self._client(request)
        name = self.gateway.options.model_name
        return JSONResponse(
            {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "beamfilter"}]}
        )

    async def chat(self, request: Request) -> Response:
        client = self._client(request)
        gateway = self.gateway
        body = await _body(request, gateway.options.max_body_bytes)
        call = parse_chat_request(body, max_messages=gateway.options.max_messages)
        caller = gateway.caller(request.headers, call, client)
        wait = gateway.wait_seconds(request.headers)
        if not call.stream:
            status, answer = await gateway.complete(call, caller, wait)
            headers = {"Location": answer["beamfilter"]["poll"]} if status == 202 else None
            return JSONResponse(answer, status_code=status, headers=headers)
        items = gateway.stream(call, caller, wait)
        first = await anext(items)  # errors before the first chunk get their own status
        return StreamingResponse(
            self._events(first, items),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _events(self, first: dict[str, Any] | str, items: AsyncIterator[dict[str, Any] | str]) -> Any:
        try:
            yield _sse(first)
            async for item in items:
                yield _sse(item)
            yield b"data: [DONE]\n\n"
        except Exception as exc:  # noqa: BLE001  # the status is sent: the error goes in the stream
            error = error_for(exc)
            if error.status >= 500 and not isinstance(exc, GatewayError):
                logger.error("streamed turn failed: %s: %s", type(exc).__name__, mask_credentials(str(exc)))
            yield _sse(error_body(error))
        finally:
            with contextlib.suppress(Exception):
                await items.aclose()  # type: ignore[attr-defined]

    async def pause(self, request: Request) -> Response:
        client = self._client(request)
        raw = request.query_params.get("wait", "0")
        try:
            wait = min(max(float(raw), 0.0), self.gateway.options.max_wait)
        except ValueError:
            msg = f"wait is {raw[:30]!r}; send a number of seconds."
            raise GatewayError(msg, status=400, param="wait") from None
        return JSONResponse(await self.gateway.poll(request.path_params["pause_id"], client, wait))

    async def pauses(self, request: Request) -> Response:
        if self._reviewer(request) is None:
            msg = "Incorrect or missing reviewer key."
            raise GatewayError(msg, status=401, code="invalid_api_key")
        gateway = self.gateway
        data = [
            {
                **gateway.pause_info(entry.pause),
                "conversation_id": entry.shown_conversation,
                "client": entry.client,
                "created": int(entry.created),
            }
            for entry in await gateway.listing()
        ]
        return JSONResponse({"object": "list", "data": data})

    async def decide_json(self, request: Request) -> Response:
        reviewer = self._reviewer(request)
        if reviewer is None:
            msg = "Incorrect or missing reviewer key."
            raise GatewayError(msg, status=401, code="invalid_api_key")
        body = await _body(request, self.gateway.options.max_body_bytes)
        raw = body.get("decisions") if isinstance(body, dict) else None
        if not isinstance(raw, dict):
            msg = "Send {'decisions': {CALL_ID: 'approve' | {...}}}."
            raise GatewayError(msg, status=400, param="decisions")
        decisions = {str(k): _decision(v, f"decisions.{k}") for k, v in raw.items()}
        entry = await self.gateway.decide(request.path_params["pause_id"], decisions, reviewer[0])
        return JSONResponse({"object": "beamfilter.pause", "id": entry.pause_id, "status": entry.status}, 202)

    # -- the inbox ----------------------------------------------------------------------

    async def inbox(self, request: Request) -> Response:
        reviewer = self._reviewer(request)
        if reviewer is None:
            return self._ask_login()
        gateway = self.gateway
        done = request.query_params.get("done")
        flash = f"Pause {done}: decision sent." if done else ""
        entries = await gateway.listing()
        version = listing_version(entries) if gateway.shared is not None else gateway.inbox.version
        page = inbox_page(entries, version, reviewer[1], flash)
        return HTMLResponse(page, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"})

    async def version(self, request: Request) -> Response:
        if self._reviewer(request) is None:
            return self._ask_login()
        raw = request.query_params.get("since", "")
        since = int(raw) if raw.isdigit() else -1
        version = await self.gateway.listing_version(since, 10.0)
        return JSONResponse({"version": version}, headers={"Cache-Control": "no-store"})

    async def decide_form(self, request: Request) -> Response:
        reviewer = self._reviewer(request)
        if reviewer is None:
            return self._ask_login()
        origin = request.headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1] != request.headers.get("host"):
            return HTMLResponse(message_page("Refused", "The form came from another site."), status_code=403)
        pause_id = request.path_params["pause_id"]
        raw = await request.body()
        if len(raw) > self.gateway.options.max_body_bytes:
            return HTMLResponse(message_page("Refused", "The form is too large."), status_code=413)
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}
        if not _same(form.get("token", ""), form_token(reviewer[1], pause_id)):
            return HTMLResponse(message_page("Refused", "The form is stale or not yours; reload the inbox."), 403)
        try:
            pause = await self.gateway.find(pause_id)
            if pause is None:
                return HTMLResponse(message_page("Unknown pause", f"No pause {pause_id} is known here."), 404)
            decisions = _form_decisions(form, pause)
            await self.gateway.decide(pause_id, decisions, reviewer[0])
        except GatewayError as exc:
            title = "Already decided" if exc.status == 409 else "Refused"
            return HTMLResponse(message_page(title, str(exc)), status_code=exc.status)
        return RedirectResponse(f"/inbox?done={pause_id}", status_code=303)

    async def health(self, request: Request) -> Response:
        closing = self.gateway.closing
        # the running asyncio tasks: a number that should not grow with the requests served
        body = {"status": "closing" if closing else "ok", "tasks": len(asyncio.all_tasks())}
        return JSONResponse(body, status_code=503 if closing else 200)


def _same(given: str, expected: str) -> bool:
    import hmac

    return hmac.compare_digest(given.encode(), expected.encode())


def _decision(value: Any, where: str) -> Decision:
    if value in ("approve", "reject"):
        return Decision(value)
    if isinstance(value, dict) and value.get("kind") in ("approve", "reject"):
        if value["kind"] == "reject":
            reason = value.get("reason")
            return Decision.reject(reason if isinstance(reason, str) and reason else None)
        arguments = value.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            msg = f"{where}.arguments must be an object."
            raise GatewayError(msg, status=400, param=f"{where}.arguments")
        return Decision.approve(arguments)
    msg = f"{where} is {json.dumps(value)[:80]}; send 'approve', 'reject' or {{'kind': ..., 'reason'/'arguments'}}."
    raise GatewayError(msg, status=400, param=where)


def _form_decisions(form: dict[str, str], pause: Any) -> dict[str, Decision]:
    calls = {call.id: call for call in pause.calls}
    every = form.get("all", "")
    decisions: dict[str, Decision] = {}
    for call_id in pause.awaiting:
        action = every or form.get(f"action:{call_id}", "approve")
        if action == "reject":
            decisions[call_id] = Decision.reject(form.get(f"reason:{call_id}", "").strip() or None)
            continue
        if action != "approve":
            msg = f"The action for call {call_id} is {action[:20]!r}."
            raise GatewayError(msg, status=400)
        text = form.get(f"arguments:{call_id}")
        if text is None:
            decisions[call_id] = Decision.approve()
            continue
        try:
            edited = json.loads(text)
        except ValueError:
            msg = f"The arguments of call {call_id} are not JSON; fix them and submit again."
            raise GatewayError(msg, status=400) from None
        if not isinstance(edited, dict):
            msg_0 = f"The arguments of call {call_id} must be a JSON object."
            raise GatewayError(msg_0, status=400)
        same = edited == dict(calls[call_id].arguments)
        decisions[call_id] = Decision.approve() if same else Decision.approve(edited)
    return decisions


def _wrap(handler: Handler) -> Handler:
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except GatewayError as exc:
            return _error(exc)
        except Exception as exc:  # noqa: BLE001  # any failure is an OpenAI error body, never a trace
            error = error_for(exc)
            if error.status >= 500:
                logger.error("request failed: %s: %s", type(exc).__name__, mask_credentials(str(exc)))
            return _error(error)

    return run


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    text = "Method not allowed." if status == 405 else f"No route {request.url.path[:100]!r}."
    return _error(GatewayError(text, status=status, code="not_found" if status == 404 else None))


def create_app(kernel: Kernel, options: ServerOptions | None = None) -> Starlette:
    """The gateway as an ASGI app: serve it with any ASGI server (``beamfilter serve`` uses Uvicorn).

    Example::

        app = create_app(Kernel.from_config("beamfilter.toml"), ServerOptions(model_name="assistant"))
    """
    options = options or ServerOptions()
    gateway = Gateway(kernel, options)
    routes = _Routes(gateway)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.kernel.start()  # a broken MCP server fails here, not on the first request
        if routes.api_keys.open:
            logger.warning("no [server] api_keys: every client is let in")
        if routes.reviewer_keys.open:
            logger.warning("no [server] inbox_keys or api_keys: the inbox is open to anyone who reaches it")
        yield
        await gateway.aclose(options.shutdown_grace)

    middleware = []
    if options.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(options.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type", "beamfilter-conversation", "beamfilter-wait"],
            )
        )
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", _wrap(routes.chat), methods=["POST"]),
            Route("/v1/models", _wrap(routes.models), methods=["GET"]),
            Route("/v1/pauses", _wrap(routes.pauses), methods=["GET"]),
            Route("/v1/pauses/{pause_id}", _wrap(routes.pause), methods=["GET"]),
            Route("/v1/pauses/{pause_id}/decide", _wrap(routes.decide_json), methods=["POST"]),
            Route("/inbox", _wrap(routes.inbox), methods=["GET"]),
            Route("/inbox/version", _wrap(routes.version), methods=["GET"]),
            Route("/inbox/{pause_id}/decide", _wrap(routes.decide_form), methods=["POST"]),
            Route("/healthz", routes.health, methods=["GET"]),
        ],
        middleware=middleware,
        exception_handlers={404: _not_found, 405: _not_found},
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    return app
