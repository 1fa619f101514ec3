"""Adapters that plug grammask into serving engines and inference frameworks.

Each submodule imports its framework lazily, on first use, so ``import grammask`` never needs
any of them:

* :mod:`grammask.integrations.vllm` -- a ``vllm.general_plugins`` entry point that runs vLLM's
  ``xgrammar`` structured-output backend (and ``auto`` routing) on grammask;
* :mod:`grammask.integrations.sglang` -- a ``sglang.srt.plugins`` entry point that registers the
  ``grammask`` grammar backend (``--grammar-backend grammask``);
* :mod:`grammask.integrations.llamacpp` -- a llama-cpp-python logits processor (vocabularies come
  from :meth:`grammask.TokenizerInfo.from_gguf`);
* :mod:`grammask.integrations.mlx` -- a logits processor for mlx-lm's ``generate_step``.

The transformers ``LogitsProcessor`` lives in :mod:`grammask.contrib.hf`, where XGrammar keeps it.
"""
