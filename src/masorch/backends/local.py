"""An embedded GGUF model run in-process with llama-cpp-python (the ``local`` extra).

One ``Llama`` object is not thread-safe, so every call to it runs on this backend's own single worker
thread: calls are serialised in arrival order and the event loop stays free while a model generates.
The model loads on the first call (in that thread) unless :meth:`LocalBackend.load` is called first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from masorch.backends.base import Completion, GenerateConfig, Message, Usage
from masorch.backends.chat import estimate_tokens, messages_payload, parse_chat_choice, tools_payload
from masorch.errors import BackendError, UsageError, require_extra

log = logging.getLogger(__name__)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalBackend:
    """A GGUF model answering chat completions in this process.

    ``n_ctx`` is the context window (prompt plus completion tokens); ``n_threads`` defaults to the
    cores this process may use; ``chat_format`` overrides the chat template stored in the GGUF file.
    ``seed`` is the sampling seed when a call gives none; sample ``i`` of a prompt uses ``seed + i``.
    JSON-schema calls are grammar-constrained, so their output parses. Calls that offer tools use
    the ``tool_chat_format`` handler of llama-cpp-python (default ``chatml-function-calling``, right
    for the ChatML models of the catalogue), whose grammar makes tool arguments follow their schema;
    ``None`` leaves tools to the model's own chat template.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        name: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        chat_format: str | None = None,
        tool_chat_format: str | None = "chatml-function-calling",
        verbose: bool = False,
    ) -> None:
        require_extra("llama_cpp", "local")
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise UsageError(
                f"no GGUF model file at {self.model_path}",
                hint="give the path of a .gguf file, or an embedded model name (masorch models list)",
            )
        if n_ctx < 256:
            # llama.cpp rounds a smaller context up to 256 while llama-cpp-python sizes its buffers
            # for the number given, and then fails mid-prompt instead of refusing it.
            raise UsageError(f"n_ctx={n_ctx} is below llama.cpp's minimum of 256", hint="use n_ctx >= 256")
        self._model_id = f"local:{name or self.model_path.stem}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _cores()
        self.n_batch = n_batch
        self.seed = seed
        self.chat_format = chat_format
        self.tool_chat_format = tool_chat_format
        self.verbose = verbose
        self._llama: Any = None
        self._worker: concurrent.futures.ThreadPoolExecutor | None = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="masorch-llama"
        )

    @property
    def model_id(self) -> str:
        """``local:<name>``."""
        return self._model_id

    def __repr__(self) -> str:
        return f"LocalBackend(model_id={self._model_id!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    def load(self) -> None:
        """Load the model now (in the calling thread) instead of on the first call."""
        if self._llama is not None:
            return
        import llama_cpp

        start = time.perf_counter()
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_batch=self.n_batch,
                seed=self.seed,
                chat_format=self.chat_format,
                verbose=self.verbose,
            )
        except (ValueError, RuntimeError) as exc:
            raise UsageError(
                f"llama.cpp could not load {self.model_path}: {exc}",
                hint="check that the file is a complete GGUF model (masorch models verify NAME)",
            ) from None
        log.info("loaded %s in %.1fs", self._model_id, time.perf_counter() - start)

    def _request(self, messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
        base_seed = self.seed if config.seed is None else config.seed
        request: dict[str, Any] = {
            "messages": messages_payload(messages),
            "temperature": config.temperature,
            "top_p": config.top_p,
            "max_tokens": config.max_tokens,
            "stop": list(config.stop),
            "seed": base_seed + config.sample_index,
        }
        if config.json_schema is not None:
            request["response_format"] = {"type": "json_object", "schema": dict(config.json_schema)}
        if config.tools:
            request["tools"] = tools_payload(config.tools)
            request["tool_choice"] = "auto"
        return request

    def _generate(self, request: dict[str, Any]) -> dict[str, Any]:
        self.load()
        try:
            if "tools" in request and self.tool_chat_format:
                from llama_cpp import llama_chat_format

                handler = llama_chat_format.get_chat_completion_handler(self.tool_chat_format)
                reply: Any = handler(llama=self._llama, **request)  # not streamed: one dict
                return dict(reply)
            return dict(self._llama.create_chat_completion(**request))
        except ValueError as exc:  # llama-cpp reports an over-long prompt this way
            raise BackendError(
                f"{self._model_id}: {exc}",
                hint=f"shorten the prompt, lower max_tokens, or raise n_ctx (now {self.n_ctx})",
                code="backend_context",
                retryable=False,
            ) from None
        except RuntimeError as exc:
            raise BackendError(
                f"{self._model_id}: llama.cpp failed: {exc}",
                hint="check the model file (masorch models verify NAME) and the memory left",
                code="backend_local",
                retryable=False,
            ) from None

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """One chat completion, run on the model's own worker thread."""
        if self._worker is None:
            raise BackendError(
                f"{self._model_id} is closed", hint="make a new backend", code="backend_closed"
            )
        if not messages:
            raise BackendError(f"{self._model_id}: no messages to send", hint="give at least one message")
        request = self._request(messages, config)
        start = time.perf_counter()
        data = await asyncio.get_running_loop().run_in_executor(self._worker, self._generate, request)
        latency = time.perf_counter() - start
        try:
            text, tool_calls, finish = parse_chat_choice(data)
        except ValueError as exc:
            raise BackendError(
                f"{self._model_id}: llama.cpp returned no usable completion: {exc}",
                hint="report it with the model name and prompt",
                code="backend_bad_reply",
                retryable=False,
            ) from None
        raw = data.get("usage") or {}
        prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
        estimated = not (isinstance(prompt, int) and isinstance(completion, int))
        usage = Usage(
            prompt_tokens=prompt
            if isinstance(prompt, int)
            else sum(estimate_tokens(m.content) for m in messages),
            completion_tokens=completion if isinstance(completion, int) else estimate_tokens(text),
            calls=1,
            estimated=estimated,
        )
        return Completion(
            text=text,
            usage=usage,
            finish=finish,
            tool_calls=tool_calls,
            model=self._model_id,
            latency_s=latency,
        )

    async def aclose(self) -> None:
        """Wait for the running call, then free the model's memory."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        await asyncio.get_running_loop().run_in_executor(worker, self._free)
        worker.shutdown(wait=True)

    def _free(self) -> None:
        llama, self._llama = self._llama, None
        if llama is not None:
            llama.close()
