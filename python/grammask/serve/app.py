"""The HTTP layer of ``grammask serve``: OpenAI-compatible routes on FastAPI.

Takes JSON requests; produces OpenAI-shaped responses and SSE streams. Routes: ``POST
/v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``, ``GET /health``. Requests
are validated here (bad parameters are HTTP 400 with ``{"error": {"message", "type", "param",
"code"}}``, as OpenAI sends them); a request then waits for one of ``max_concurrency`` slots,
starts its grammar compile (cached) and its decode thread side by side, and answers 400 if the
compile fails. A slot is freed when its decode thread ends; a client that disconnects mid-stream
sets the request's cancel flag, which the decode loop checks every token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from ..exception import GrammaskError
from .engine import Engine
from .formats import GrammarSpec, grammar_spec
from .tools import RequestError, normalize_tool_choice, parse_tool_calls, tool_grammar

__all__ = ["create_app"]

MAX_TOKENS_DEFAULT = 256


def _error(
    status: int, message: str, param: Optional[str] = None, code: str = "invalid_request_error"
) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": code}},
        status_code=status,
    )


def _number(
    body: Dict[str, Any], name: str, default: Any, lo: float, hi: float, integer: bool = False
) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (integer and not isinstance(value, int))
    ):
        raise RequestError(
            f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}", name
        )
    if not lo <= value <= hi:
        raise RequestError(f"{name} must be between {lo:g} and {hi:g}, got {value}", name)
    return value


class _Params:
    """Sampling parameters common to both completion routes."""

    def __init__(self, body: Dict[str, Any], max_len: int) -> None:
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        self.max_tokens = _number(
            {"max_tokens": limit}, "max_tokens", MAX_TOKENS_DEFAULT, 1, max_len, integer=True
        )
        self.temperature = float(_number(body, "temperature", 1.0, 0.0, 2.0))
        self.top_p = float(_number(body, "top_p", 1.0, 0.0, 1.0))
        if self.top_p == 0:
            raise RequestError("top_p must be greater than 0", "top_p")
        self.seed = _number(body, "seed", None, -(2**63), 2**63 - 1, integer=True)
        n = _number(body, "n", 1, 1, 1, integer=True)
        del n
        self.stream = bool(body.get("stream", False))
        options = body.get("stream_options") or {}
        if not isinstance(options, dict):
            raise RequestError("stream_options must be an object", "stream_options")
        self.include_usage = bool(options.get("include_usage", False))
        if body.get("stop"):
            raise RequestError(
                "stop sequences are not supported by grammask serve; constrain the output with response_format",
                "stop",
            )
        if body.get("logprobs"):
            raise RequestError("logprobs are not supported by grammask serve", "logprobs")


def create_app(engine: Engine, *, max_concurrency: int = 4) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        engine.close()

    app = FastAPI(title="grammask serve", docs_url=None, redoc_url=None, lifespan=lifespan)
    slots = asyncio.Semaphore(max_concurrency)
    state = {"active": 0, "waiting": 0, "served": 0, "cancelled": 0}

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, e: RequestError) -> JSONResponse:
        return _error(400, e.message, e.param, e.code)

    @app.exception_handler(Exception)
    async def _server_error(_: Request, e: Exception) -> JSONResponse:  # a bug: answer, stay up
        return _error(500, f"internal error: {type(e).__name__}: {e}", code="internal_error")

    @app.get("/health")
    async def health() -> Dict[str, Any]:
        return {
            "status": "ok",
            "model": engine.model_id,
            **state,
            "grammar_cache": {
                "entries": len(engine._cache),
                "hits": engine.cache_hits,
                "misses": engine.cache_misses,
            },
        }

    @app.get("/v1/models")
    async def models() -> Dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": engine.model_id, "object": "model", "created": 0, "owned_by": "grammask"}
            ],
        }

    async def _body(request: Request) -> Dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise RequestError("the request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        return body

    async def _start(
        prompt_ids: List[int],
        spec: Optional[GrammarSpec],
        params: _Params,
        loop: asyncio.AbstractEventLoop,
    ):
        """Take a slot, start compile + decode. Returns (decode future, token queue, cancel flag,
        compile future). Raises RequestError if the grammar does not compile."""
        state["waiting"] += 1
        try:
            await slots.acquire()
        finally:
            state["waiting"] -= 1
        state["active"] += 1
        cancel = threading.Event()
        queue: "asyncio.Queue[Optional[int]]" = asyncio.Queue()
        try:
            compile_future = engine.compiled(spec) if spec is not None else None
            job = engine.decode_pool.submit(
                engine.run,
                prompt_ids,
                compile_future,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                seed=params.seed,
                cancel=cancel,
                on_token=lambda t: loop.call_soon_threadsafe(queue.put_nowait, t),
            )
        except BaseException:
            state["active"] -= 1
            slots.release()
            raise

        def _done(f: Future) -> None:
            def release() -> None:
                state["active"] -= 1
                state["served"] += 1
                slots.release()
                queue.put_nowait(None)

            loop.call_soon_threadsafe(release)

        job.add_done_callback(_done)
        if compile_future is not None:
            try:
                await asyncio.wrap_future(compile_future)
            except (GrammaskError, ValueError, TypeError, RuntimeError) as e:
                cancel.set()
                if isinstance(e, RequestError):
                    raise
                raise RequestError(
                    f"{type(e).__name__}: {e}", "response_format", "invalid_grammar"
                ) from None
        return job, queue, cancel

    def _usage(gen: Any) -> Dict[str, Any]:
        extra: Dict[str, Any] = {
            "prefill_s": round(gen.prefill_s, 6),
            "model_per_token_s": round(gen.model_per_token_s, 7),
        }
        if gen.grammar_completed is not None:
            extra.update(
                grammar_init_s=round(gen.grammar_init_s, 6),
                grammar_per_token_s=round(gen.grammar_per_token_s, 7),
                budget_per_token_s=round(gen.budget_per_token_s, 7),
                grammar_wait_after_prefill_s=round(gen.grammar_wait_s, 6),
                budget_closed=gen.budget_closed,
            )
        return {
            "prompt_tokens": gen.prompt_tokens,
            "completion_tokens": gen.completion_tokens,
            "total_tokens": gen.prompt_tokens + gen.completion_tokens,
            "extra": extra,
        }

    def _finish(gen: Any, calls: List[Any]) -> str:
        if gen.finish_reason == "stop" and calls:
            return "tool_calls"
        return gen.finish_reason

    def _prepare_chat(body: Dict[str, Any]) -> Tuple[List[int], Optional[GrammarSpec], bool]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages must be a non-empty list", "messages")
        clean = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in (
                "system",
                "developer",
                "user",
                "assistant",
                "tool",
            ):
                raise RequestError(
                    f"messages[{i}] must have a role of system, user, assistant or tool",
                    f"messages[{i}]",
                )
            content = m.get("content")
            if isinstance(content, list):  # content parts: keep the text ones
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            clean.append(
                {
                    **m,
                    "role": "system" if m["role"] == "developer" else m["role"],
                    "content": content or "",
                }
            )
        mode, functions = normalize_tool_choice(body.get("tools"), body.get("tool_choice"))
        spec = grammar_spec(body.get("response_format"))
        use_tools = mode in ("auto", "required")
        if use_tools and spec is not None:
            if mode == "required":
                raise RequestError(
                    "response_format cannot be combined with tool_choice 'required' or a named function",
                    "response_format",
                )
            use_tools = False  # auto + response_format: the format wins, as in SGLang
        if use_tools:
            parallel = body.get("parallel_tool_calls", True) is not False
            key, compile_fn = tool_grammar(
                functions, mode, model_family=engine.tool_format, parallel=parallel
            )
            spec = GrammarSpec(key, "tools", compile_fn)
        template_tools = [{"type": "function", "function": fn} for fn in functions] or None
        return engine.chat_prompt(clean, template_tools), spec, use_tools

    async def _respond(request: Request, body: Dict[str, Any], chat: bool) -> Any:
        params = _Params(body, engine.max_model_len)
        if chat:
            prompt_ids, spec, use_tools = _prepare_chat(body)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            if not isinstance(prompt, str):
                raise RequestError("prompt must be a string (one prompt per request)", "prompt")
            prompt_ids, spec, use_tools = (
                engine.text_prompt(prompt),
                grammar_spec(body.get("response_format")),
                False,
            )
        loop = asyncio.get_running_loop()
        job, queue, cancel = await _start(prompt_ids, spec, params, loop)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        base = {"id": rid, "created": created, "model": engine.model_id}
        decoder = engine.text_decoder()

        if not params.stream:
            try:
                gen = await asyncio.wrap_future(job)
            except asyncio.CancelledError:
                cancel.set()
                raise
            text = decoder.decode(gen.token_ids)
            calls: List[Any] = []
            if use_tools:
                content, calls = parse_tool_calls(text)
            else:
                content = text
            if chat:
                message: Dict[str, Any] = {"role": "assistant", "content": content}
                if calls:
                    message["tool_calls"] = calls
                choice: Dict[str, Any] = {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _finish(gen, calls),
                }
            else:
                choice = {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": _finish(gen, calls),
                }
            return {
                **base,
                "object": "chat.completion" if chat else "text_completion",
                "choices": [choice],
                "usage": _usage(gen),
            }

        obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(
            delta: Optional[Dict[str, Any]] = None,
            text: Optional[str] = None,
            finish: Optional[str] = None,
        ) -> str:
            if chat:
                ch: Dict[str, Any] = {
                    "index": 0,
                    "delta": delta or {},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            else:
                ch = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
            return (
                "data: "
                + json.dumps({**base, "object": obj, "choices": [ch]}, ensure_ascii=False)
                + "\n\n"
            )

        async def events() -> AsyncIterator[str]:
            buffered: List[str] = []
            try:
                if chat:
                    yield chunk({"role": "assistant", "content": ""})
                while True:
                    token = await queue.get()
                    if token is None:
                        break
                    piece = decoder.push(token)
                    if use_tools:  # tool calls are parsed from the whole text at the end
                        buffered.append(piece)
                    elif piece:
                        yield chunk({"content": piece}, piece)
                gen = job.result()
                tail = decoder.flush()
                calls: List[Any] = []
                if use_tools:
                    content, calls = parse_tool_calls("".join(buffered) + tail)
                    if content:
                        yield chunk({"content": content}, content)
                    if calls:
                        yield chunk(
                            {"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]}
                        )
                elif tail:
                    yield chunk({"content": tail}, tail)
                yield chunk(finish=_finish(gen, calls))
                if params.include_usage:
                    yield (
                        "data: "
                        + json.dumps({**base, "object": obj, "choices": [], "usage": _usage(gen)})
                        + "\n\n"
                    )
                yield "data: [DONE]\n\n"
            finally:
                if not job.done():  # the client went away: stop decoding, which frees the slot
                    cancel.set()
                    state["cancelled"] += 1

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await _respond(request, await _body(request), chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await _respond(request, await _body(request), chat=False)

    return app
