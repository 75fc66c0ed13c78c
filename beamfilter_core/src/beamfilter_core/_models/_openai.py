"""OpenAIChatModel: any OpenAI-compatible ``/chat/completions`` server over httpx.

Works with OpenAI, vLLM, llama.cpp's server, Ollama and LM Studio; with ``api="responses"``
it speaks OpenAI's Responses API instead. The wire rules are in :mod:`._wire` (and
:mod:`._responses_wire`); the HTTP half (retries, timeouts, caps, stream decoding,
cancellation) is :class:`._http.HTTPChatModel`, shared with every provider.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar, Unpack

from .._records import ChatRequest
from ..errors import ConfigError
from ._http import HTTPChatModel, HTTPOptions
from ._wire import StreamAccumulator, parse_completion, request_body

__all__ = ["OpenAIChatModel"]


class OpenAIChatModel(HTTPChatModel):
    """A chat model served over the OpenAI chat-completions protocol.

    Args:
        model: the model name sent in every request.
        base_url: the API root, e.g. ``http://127.0.0.1:8080/v1`` for llama.cpp's server.
        api_key: the key; when None it is read from the ``api_key_env`` variable.
            Local servers usually need none (no ``Authorization`` header is sent then).
        options: extra body fields for every call (``temperature``, ``max_tokens``...);
            ``ChatRequest.options`` are merged over them.
        timeout: seconds for connecting, for a non-streamed answer, and the longest
            silence allowed between two chunks of a stream.
        deadline: seconds for the whole call, retries and their waits included (a server
            that keeps streaming never ends a call otherwise); None for no bound.
        max_retries: retries after the first attempt (see :mod:`._retry` for the policy).
        max_event_chars: the longest SSE event (or line) accepted from a stream.
        max_answer_chars: the longest answer (text plus tool arguments) accepted.
        max_argument_chars: the longest arguments of one tool call accepted.
        client: an ``httpx.AsyncClient`` you own (not closed by :meth:`aclose`).
        transport: an httpx transport for a client this model creates and owns.
        api: ``"chat"`` (``/chat/completions``, the default) or ``"responses"``
            (``/responses``, see :mod:`._responses_wire`).

    Example::

        async with OpenAIChatModel("gpt-4o-mini") as model:
            kernel = Kernel(model)
            print((await kernel.run("Hello")).text)
    """

    _label = "OpenAIChatModel"
    _default_base_url = "https://api.openai.com/v1"
    _default_key_env = "OPENAI_API_KEY"
    _default_host = "api.openai.com"
    _model_needed = "a model name, e.g. 'gpt-4o-mini'"
    _base_url_needed = "an http(s) URL such as 'http://127.0.0.1:8080/v1'"
    _replays_json = True
    _logger: ClassVar[logging.Logger] = logging.getLogger("beamfilter.models.openai")

    def __init__(
        self,
        model: str,
        *,
        base_url: str = _default_base_url,
        api_key_env: str | None = "OPENAI_API_KEY",
        api: str = "chat",
        **options: Unpack[HTTPOptions],
    ) -> None:
        if api not in ("chat", "responses"):
            msg = f"OpenAIChatModel(api={api!r}) must be 'chat' (/chat/completions) or 'responses' (/responses)."
            raise ConfigError(msg)
        # api_key_env=None reads no variable (a local server needs no key)
        super().__init__(model, base_url=base_url, api_key_env="" if api_key_env is None else api_key_env, **options)
        self.api = api
        self._plain_url = self._stream_url = self.base_url + "/chat/completions"
        self._body_of = request_body
        self._parse_answer = parse_completion
        self._new_accumulator = StreamAccumulator
        if api == "responses":  # imported only when used: `import beamfilter_core` stays lean
            from . import _responses_wire

            self._plain_url = self._stream_url = self.base_url + "/responses"
            self._body_of = _responses_wire.request_body
            self._parse_answer = _responses_wire.parse_response
            self._new_accumulator = _responses_wire.ResponsesAccumulator

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return self._body_of(request, self.model, self.options, stream=stream)

    def _replay(self, accumulator: Any, text: str) -> None:
        chunk: Any = {"choices": [{"index": 0, "delta": {"content": text}}]}
        if self.api == "responses":
            chunk = {"type": "response.output_text.delta", "delta": text}
        accumulator.feed(json.dumps(chunk))
