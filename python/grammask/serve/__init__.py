"""``grammask serve``: an OpenAI-compatible server over a ``transformers`` causal LM, constrained by
``response_format`` and ``tools``.

Modules, in the order a request meets them: :mod:`.app` (FastAPI routes, validation, slots,
SSE), :mod:`.formats` (``response_format`` to a grammar and its cache key), :mod:`.tools`
(tools/``tool_choice`` and structural tags to a grammar, output to ``tool_calls``), :mod:`.engine`
(model, tokenizer, compiled-grammar cache, threads), :mod:`.decode` (the constrained decode loop
and the token-budget fallback, shared with ``grammask demo``), :mod:`.server` (the CLI entry).

Importing this package imports nothing heavy; torch, transformers and fastapi are imported by the
submodules that need them (the ``serve`` extra).
"""
