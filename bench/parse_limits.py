"""Parse + validate time at 10 KB, 100 KB and 1 MB per dialect and input shape; the 1 MB / 100 KB ratio.

Linear time means a ratio near 10 (the target is <= 12); a quadratic reader shows about 100. The
shapes include the inputs that once took quadratic time or crashed: calls on one line, runs of
``{``, runs of ``<thinking>``/``<think>``, plans with thousands of agents. The text-size cap
(``Limits.max_text_chars``) is raised so that the readers themselves are measured; with the default
cap, anything over it is rejected (``plan_too_large``) before it is read.

Run: ``PYTHONPATH=src python bench/parse_limits.py [--sizes 10000 100000 1000000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import DoM, Limits, check


def _repeat(unit: Callable[[int], str], size: int, head: str = "", tail: str = "") -> str:
    """``head``, then ``unit(0)``, ``unit(1)``, ... until ``size`` characters, then ``tail``."""
    parts = [head]
    total = len(head) + len(tail)
    i = 0
    while total < size:
        part = unit(i)
        parts.append(part)
        total += len(part)
        i += 1
    parts.append(tail)
    return "".join(parts)


def _call_agent(i: int) -> str:
    return f'create_agent(id="a{i}", kind="cot", task="Step {i}: use ${{a{i - 1}}} and go on.")'


def _call_line(i: int) -> str:
    return _call_agent(i) + (f'\ncreate_flow("a{i - 1}", "a{i}")\n' if i else "\n")


def _json_agent(i: int) -> str:
    return f'{{"id": "a{i}", "kind": "cot", "task": "Step {i}: go on."}}, '


def _xml_agent(i: int) -> str:
    return (
        f"<agent><agent_id>a{i}</agent_id><agent_name>CoTAgent</agent_name><required_arguments>"
        f"<agent_input>Step {i}: use ${{a{i - 1}}}.</agent_input></required_arguments></agent>\n"
        + (f"<edge><from>a{i - 1}</from><to>a{i}</to></edge>\n" if i else "")
    )


#: Input shapes per dialect: name -> function of the size in characters.
SHAPES: dict[str, tuple[str, Callable[[int], str]]] = {
    "calls: agents, one per line": ("calls", lambda n: _repeat(_call_line, n)),
    "calls: all calls on one line": ("calls", lambda n: _repeat(lambda i: _call_agent(i) + " ", n)),
    "calls: hex integer literal": (
        "calls",
        lambda n: _repeat(lambda i: "f" * 1000, n, 'create_agent(id="a", kind="sc", n=0x', ")"),
    ),
    "calls: unclosed calls": ("calls", lambda n: _repeat(lambda i: "create_agent(", n)),
    "json: agents in one object": (
        "json",
        lambda n: _repeat(_json_agent, n, '{"agents": [', '{"id": "z", "kind": "cot"}]}'),
    ),
    "json: run of {": ("json", lambda n: "{" * n),
    "json: broken objects": ("json", lambda n: _repeat(lambda i: '{"k" ', n)),
    "xml: agents and edges": ("xml", lambda n: _repeat(_xml_agent, n)),
    "xml: run of <thinking>": ("xml", lambda n: _repeat(lambda i: "<thinking>", n)),
    "xml: run of <think>": ("xml", lambda n: _repeat(lambda i: "<think>", n, "<agent>")),
    "xml: unclosed tags in an agent": (
        "xml",
        lambda n: _repeat(lambda i: "<agent_id><x><answer>", n, "<agent>", "</agent>"),
    ),
}


def time_sizes(texts: list[str], dialect: str, limits: Limits, repeat: int) -> list[float]:
    """Best CPU seconds of ``check`` on each text; the sizes take turns, so load hits them alike."""
    catalogue = builtin_catalogue()
    best = [float("inf")] * len(texts)
    for _ in range(repeat):
        for i, text in enumerate(texts):
            gc.collect()  # each run starts from the same collector state
            start = time.process_time()
            check(text, DoM.HIGH, catalogue, dialect, limits)  # type: ignore[arg-type]
            best[i] = min(best[i], time.process_time() - start)
    return best


def main() -> None:
    """Measure and print one row per shape: the time at each size and the ratio of the last two."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per cell; the best is shown")
    args = parser.parse_args()
    sizes: list[int] = sorted(args.sizes)
    limits = Limits(max_text_chars=2 * sizes[-1])
    # The objects of the imported modules are set aside, so the collector's full passes scan only
    # what parsing allocates, as in a process that has run for a while.
    gc.collect()
    gc.freeze()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"check() (parse + validate), CPU time, best of {args.repeat}; load average {load:.1f}")
    header = "".join(f"{_size(s):>10}" for s in sizes)
    print(f"{'shape':<34}{header}{'ratio':>8}")
    for name, (dialect, build) in SHAPES.items():
        times = time_sizes([build(s) for s in sizes], dialect, limits, args.repeat)
        ratio = times[-1] / times[-2] if len(times) > 1 and times[-2] > 0 else float("nan")
        cells = "".join(f"{_ms(t):>10}" for t in times)
        print(f"{name:<34}{cells}{ratio:>8.1f}")


def _size(n: int) -> str:
    return f"{n // 1_000_000} MB" if n >= 1_000_000 else f"{n // 1000} KB"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


if __name__ == "__main__":
    main()
