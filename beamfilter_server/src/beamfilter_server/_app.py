"""The ASGI application (Starlette): the route table, keys, caps and OpenAI's error JSON.

Each route declares who may call it (:class:`Auth`) in :data:`the table <_Routes.table>`;
the app checks that before the handler runs, so a handler never forgets it:

- ``CLIENT``: a client key, ``Authorization: Bearer`` (or anyone on a gateway without keys);
- ``REVIEWER``: a reviewer key as ``Authorization: Bearer`` only. A browser never attaches
  that header by itself, so another site cannot make a reviewer's browser call the JSON
  decision API; its bodies must also be ``Content-Type: application/json`` (415 otherwise);
- ``INBOX``: a reviewer signed in to the inbox page (HTTP Basic: any name, the key as
  password). A decision from the page also needs the form's token and the page's Origin;
- ``ANYONE``: the health check.

A new wire dialect (another provider's API) is one more row of the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

import attrs
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from beamfilter_core import Decision, Kernel, PauseState
from beamfilter_core.errors import GatewayError
from beamfilter_core.secrets import escape_controls, mask_secrets

from ._answers import error_for, stream_error
from ._auth import KeyRing, basic_password, bearer
from ._body import read_json
from ._dialects import ANTHROPIC, RESPONSES, dialect_handler
from ._gateway import Gateway, seconds
from ._idempotency import fingerprint, idempotency_key
from ._options import ServerOptions
from ._page import confirm_page, form_token, inbox_page, message_page
from ._shared import already_decided
from ._wire import error_body, parse_chat_request

__all__ = ["Auth", "Endpoint", "create_app"]

logger = logging.getLogger("beamfilter.server")


class Auth(enum.Enum):
    """Who may call a route."""

    CLIENT = "client key (Bearer)"
    CLIENT_OR_X_API_KEY = "client key (Bearer, or x-api-key as Anthropic's clients send it)"
    REVIEWER = "reviewer key (Bearer)"
    INBOX = "reviewer signed in to the inbox (Basic)"
    ANYONE = "anyone"


@attrs.frozen(slots=True)
class Caller:
    """Who a request comes from, once its route's authentication passed."""

    client: str | None = None
    reviewer: str | None = None
    key: str = ""


Handler = Callable[[Request, Caller], Awaitable[Response]]


@attrs.frozen(slots=True)
class Endpoint:
    """One row of the route table: a path, a method, who may call it, and its handler.
    ``json`` routes take a JSON body and refuse any other Content-Type (415)."""

    path: str
    method: str
    auth: Auth
    handler: Handler
    json: bool = False
    errors: Callable[[GatewayError], dict[str, Any]] = error_body  # the dialect's error JSON


def _error(error: GatewayError, errors: Callable[[GatewayError], dict[str, Any]] = error_body) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(errors(error), status_code=error.status, headers=headers)


def _sse(item: dict[str, Any] | str) -> bytes:
    if isinstance(item, str):
        return f": {item}\n\n".encode()
    return b"data: " + json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def _html(title: str, text: str, status: int) -> HTMLResponse:
    return HTMLResponse(message_page(title, text), status_code=status, headers={"X-Frame-Options": "DENY"})


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class _Routes:
    """The handlers, bound to one gateway and its key rings."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        options = gateway.options
        self.api_keys = KeyRing(options.api_keys)
        self.reviewer_keys = KeyRing(options.inbox_keys)
        self.anthropic = dialect_handler(gateway, ANTHROPIC, read_json)
        self.responses = dialect_handler(gateway, RESPONSES, read_json)

    @property
    def table(self) -> tuple[Endpoint, ...]:
        """Every route: its path, method, authentication and handler."""
        return (
            Endpoint("/v1/chat/completions", "POST", Auth.CLIENT, self.chat, json=True),
            Endpoint("/v1/models", "GET", Auth.CLIENT, self.models),
            Endpoint(
                "/v1/messages", "POST", Auth.CLIENT_OR_X_API_KEY, self.anthropic, json=True, errors=ANTHROPIC.error_body
            ),
            Endpoint("/v1/responses", "POST", Auth.CLIENT, self.responses, json=True),
            Endpoint("/v1/pauses", "GET", Auth.REVIEWER, self.pauses),
            Endpoint("/v1/pauses/{pause_id}", "GET", Auth.CLIENT, self.pause),
            Endpoint("/v1/pauses/{pause_id}/decide", "POST", Auth.REVIEWER, self.decide_json, json=True),
            Endpoint("/inbox", "GET", Auth.INBOX, self.inbox),
            Endpoint("/inbox/version", "GET", Auth.INBOX, self.version),
            Endpoint("/inbox/{pause_id}/decide", "POST", Auth.INBOX, self.decide_form),
            Endpoint("/healthz", "GET", Auth.ANYONE, self.health),
        )

    # -- authentication -----------------------------------------------------------------

    def authenticate(self, auth: Auth, request: Request) -> Caller | Response:
        """The caller of a route, or the response refusing it."""
        header = request.headers.get("authorization")
        if auth is Auth.ANYONE:
            return Caller()
        if auth is Auth.CLIENT or auth is Auth.CLIENT_OR_X_API_KEY:
            if self.api_keys.open:
                return Caller()
            key = bearer(header)
            if key is None and auth is Auth.CLIENT_OR_X_API_KEY:
                key = request.headers.get("x-api-key")
            client = self.api_keys.identify(key)
            if client is None:
                how = "x-api-key: <key> or " if auth is Auth.CLIENT_OR_X_API_KEY else ""
                msg = f"Incorrect or missing API key; send {how}Authorization: Bearer <key>."
                raise GatewayError(msg, status=401, code="invalid_api_key")
            return Caller(client=client)
        if auth is Auth.REVIEWER:
            key = bearer(header)  # never Basic: a browser resends that by itself
            if self.reviewer_keys.open or (key is not None and self.reviewer_keys.accepts(key)):
                return Caller(reviewer="api", key=key or "")
            msg = "Incorrect or missing reviewer key; send Authorization: Bearer <reviewer key>."
            raise GatewayError(msg, status=401, code="invalid_api_key")
        found = basic_password(header)
        if found is not None and (self.reviewer_keys.open or self.reviewer_keys.accepts(found[1])):
            return Caller(reviewer=(found[0] or "reviewer")[:64], key=found[1])
        if found is None and self.reviewer_keys.open:
            return Caller(reviewer="reviewer")
        return HTMLResponse(
            message_page("Sign in", "The inbox needs a reviewer key (any name, the key as password)."),
            status_code=401,
            headers={"WWW-Authenticate": 'Basic realm="beamfilter inbox", charset="UTF-8"'},
        )

    # -- the OpenAI wire ----------------------------------------------------------------

    async def models(self, request: Request, caller: Caller) -> Response:
        name = self.gateway.options.model_name
        return JSONResponse(
            {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "beamfilter"}]}
        )

    async def chat(self, request: Request, caller: Caller) -> Response:
        gateway = self.gateway
        body = await read_json(request, gateway.options.max_body_bytes)
        call = parse_chat_request(body, max_messages=gateway.options.max_messages)
        who = gateway.caller(request.headers, call, caller.client)
        wait = gateway.wait_seconds(request.headers)
        key = idempotency_key(request.headers)
        digest = fingerprint(body) if key is not None else ""
        if not call.stream:
            status, answer = await gateway.complete(call, who, wait, key, digest)
            headers = {"Location": answer["beamfilter"]["poll"]} if status == 202 else None
            return JSONResponse(answer, status_code=status, headers=headers)
        items = gateway.stream(call, who, wait, key, digest)
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
            yield _sse(error_body(stream_error(exc)))
        finally:
            with contextlib.suppress(Exception):
                await items.aclose()  # type: ignore[attr-defined]

    async def pause(self, request: Request, caller: Caller) -> Response:
        raw = request.query_params.get("wait", "0")
        wait = seconds(raw, "wait", self.gateway.options.max_wait)
        return JSONResponse(await self.gateway.poll(request.path_params["pause_id"], caller.client, wait))

    async def pauses(self, request: Request, caller: Caller) -> Response:
        gateway = self.gateway
        data = [
            {
                **gateway.answers.pause_info(entry.pause),
                "conversation_id": entry.shown_conversation,
                "client": entry.client,
                "created": int(entry.created),
                "paused_by": entry.paused_by,
            }
            for entry in await gateway.board.listing()
        ]
        return JSONResponse({"object": "list", "data": data})

    async def decide_json(self, request: Request, caller: Caller) -> Response:
        body = await read_json(request, self.gateway.options.max_body_bytes)
        raw = body.get("decisions") if isinstance(body, dict) else None
        if not isinstance(raw, dict):
            msg = "Send {'decisions': {CALL_ID: 'approve' | {...}}}."
            raise GatewayError(msg, status=400, param="decisions")
        decisions = {str(k): _decision(v, f"decisions.{k}") for k, v in raw.items()}
        answer = await self.gateway.decide(request.path_params["pause_id"], decisions, caller.reviewer or "api")
        return JSONResponse(answer)

    # -- the inbox ----------------------------------------------------------------------

    async def inbox(self, request: Request, caller: Caller) -> Response:
        board = self.gateway.board
        done, status = request.query_params.get("done"), request.query_params.get("status")
        flash = f"Pause {done}: decided; its turn {status}." if done and status in ("completed", "failed") else ""
        entries = await board.listing()
        page = inbox_page(entries, await board.version(), caller.key, flash)
        return HTMLResponse(page, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"})

    async def version(self, request: Request, caller: Caller) -> Response:
        raw = request.query_params.get("since", "")
        since = int(raw) if raw.isdigit() else -1
        version = await self.gateway.board.changed(since, 0.0 if self.gateway.closing else 10.0)
        return JSONResponse({"version": version}, headers={"Cache-Control": "no-store"})

    async def decide_form(self, request: Request, caller: Caller) -> Response:
        origin = request.headers.get("origin")
        if origin is None or origin.split("://", 1)[-1] != request.headers.get("host"):
            # browsers send Origin with every form POST: none, or another, is not this page
            return _html("Refused", "The form came from another site (or without its Origin).", 403)
        pause_id = request.path_params["pause_id"]
        limit = self.gateway.options.max_body_bytes
        raw = await request.body()
        if len(raw) > limit:
            return _html("Refused", "The form is too large.", 413)
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}
        if not _same(form.get("token", ""), form_token(caller.key, pause_id)):
            return _html("Refused", "The form is stale or not yours; reload the inbox.", 403)
        try:
            entry = await self.gateway.board.entry(pause_id)
            if entry.status != "pending":  # a stale page: say so before reading its fields
                raise already_decided(pause_id, entry.decided_by)
            decisions, edits = _form_decisions(form, entry.pause)
            if edits and form.get("confirm") != "1":
                return HTMLResponse(confirm_page(pause_id, form, edits), headers={"X-Frame-Options": "DENY"})
            answer = await self.gateway.decide(pause_id, decisions, caller.reviewer or "reviewer")
        except GatewayError as exc:
            title = {409: "Already decided", 404: "Unknown pause", 422: "Decision refused"}.get(exc.status, "Refused")
            return _html(title, str(exc), exc.status)
        return RedirectResponse(f"/inbox?done={quote(pause_id)}&status={answer['status']}", status_code=303)

    async def health(self, request: Request, caller: Caller) -> Response:
        closing = self.gateway.closing
        # the running asyncio tasks: a number that should not grow with the requests served
        body = {"status": "closing" if closing else "ok", "tasks": len(asyncio.all_tasks())}
        return JSONResponse(body, status_code=503 if closing else 200)


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


def _form_decisions(
    form: dict[str, str], pause: PauseState
) -> tuple[dict[str, Decision], dict[str, tuple[dict[str, Any], dict[str, Any]]]]:
    """The decisions of an inbox form, and the edited arguments (``{call_id: (before, after)}``).
    Nothing is preselected: a call without a choice is refused, and so is a reason without
    a rejection."""
    calls = {call.id: call for call in pause.calls}
    every = form.get("all", "")
    decisions: dict[str, Decision] = {}
    edits: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for call_id in pause.awaiting:
        action = every or form.get(f"action:{call_id}", "")
        reason = form.get(f"reason:{call_id}", "").strip()
        if action == "reject":
            decisions[call_id] = Decision.reject(reason or None)
            continue
        if action != "approve":
            shown = f" is {action[:20]!r}" if action else " was not chosen"
            extra = " (a reason was given: choose reject to send it)" if reason and not action else ""
            msg = f"The decision for call {call_id}{shown}{extra}; choose approve or reject and submit again."
            raise GatewayError(msg, status=400)
        if reason:
            msg = f"Call {call_id} is approved with a reason; a reason goes with a rejection. Clear it or reject."
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
            msg = f"The arguments of call {call_id} must be a JSON object."
            raise GatewayError(msg, status=400)
        before = dict(calls[call_id].arguments)
        if edited == before:
            decisions[call_id] = Decision.approve()
        else:
            decisions[call_id] = Decision.approve(edited)
            edits[call_id] = (before, edited)
    return decisions, edits


def _guarded(routes: _Routes, endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint's handler behind its authentication, Content-Type and error handling."""

    async def run(request: Request) -> Response:
        try:
            caller = routes.authenticate(endpoint.auth, request)
            if isinstance(caller, Response):
                return caller
            if endpoint.json:
                media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                if media != "application/json":
                    msg = f"Send the body as Content-Type: application/json (got {media[:60] or 'none'!r})."
                    raise GatewayError(msg, status=415, code="unsupported_media_type")
            return await endpoint.handler(request, caller)
        except GatewayError as exc:
            return _error(exc, endpoint.errors)
        except Exception as exc:  # noqa: BLE001  # any failure is an OpenAI error body, never a trace
            error = error_for(exc)
            if error.status >= 500:
                logger.error("request failed: %s: %s", type(exc).__name__, escape_controls(mask_secrets(str(exc))))
            return _error(error, endpoint.errors)

    return run


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    text = "Method not allowed." if status == 405 else f"No route {request.url.path[:100]!r}."
    return _error(GatewayError(text, status=status, code="not_found" if status == 404 else None))


def create_app(kernel: Kernel, options: ServerOptions | None = None) -> Starlette:
    """The gateway as an ASGI app: serve it with any ASGI server (``beamfilter serve`` uses Uvicorn).

    Raises:
        ConfigError: the kernel's filters can pause turns and ``options`` names no
            ``inbox_keys``, or a key is both a client's and a reviewer's.

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
            logger.warning("no [server] inbox_keys: the inbox is open to anyone who reaches it (no filter pauses)")
        yield
        await gateway.aclose(options.shutdown_grace)

    middleware = []
    if options.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(options.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=[
                    "authorization",
                    "content-type",
                    "beamfilter-conversation",
                    "beamfilter-wait",
                    "idempotency-key",
                ],
            )
        )
    app = Starlette(
        routes=[Route(e.path, _guarded(routes, e), methods=[e.method]) for e in routes.table],
        middleware=middleware,
        exception_handlers={404: _not_found, 405: _not_found},
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    return app
