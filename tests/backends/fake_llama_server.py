"""A stand-in for the ``llama-server`` binary in tests: the loopback OpenAI server on ``--port``.

Behaviour comes from environment variables, so one script covers every case:
``FAKE_MODE`` = ``ok`` (default) | ``bad_model`` (exit 1 as llama.cpp does on a corrupt file) |
``clash_once`` (the first start reports a port clash, using ``FAKE_STATE`` as a counter file) |
``hang`` (prints a loader line, never answers /health). A request whose last message is ``die``
ends the process.
``FAKE_ARGS`` names a file that receives the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    known, _ = parser.parse_known_args()
    if os.environ.get("FAKE_ARGS"):
        Path(os.environ["FAKE_ARGS"]).write_text(json.dumps(sys.argv[1:]))
    mode = os.environ.get("FAKE_MODE", "ok")
    if mode == "bad_model":
        print("llama_model_load: error loading model: tensor data is not within file bounds", flush=True)
        print("main: exiting due to model loading error", flush=True)
        sys.exit(1)
    if mode == "clash_once":
        state = Path(os.environ["FAKE_STATE"])
        starts = int(state.read_text() or "0") if state.exists() else 0
        state.write_text(str(starts + 1))
        if starts == 0:
            print(f"couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {known.port}", flush=True)
            sys.exit(1)
    if mode == "hang":
        print("llama_model_loader: loaded meta data with 26 key-value pairs", flush=True)
        time.sleep(600)
        return

    from masorch.backends.loopback import LoopbackServer

    def respond(messages: list[dict[str, object]]) -> str:
        if messages and messages[-1].get("content") == "die":
            os._exit(3)
        return f"model {Path(known.model).name}: {messages[-1].get('content') if messages else ''}"

    with LoopbackServer(respond, port=known.port):
        print("main: server is listening", flush=True)
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main()
