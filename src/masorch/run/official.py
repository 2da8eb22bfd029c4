"""The ``official`` prompt profile: the message layout the released MAS-Orchestra checkpoints saw.

The checkpoints were trained on three messages: a system message (the MAS level, the channels, the
sub-agents' model), a long user message (the rules for this DoM, worked examples, then the
question) and a developer block sent as a second user message (the channel list, the tag schema and
one JSON description per available agent). This profile writes that layout in masorch's own words
(``prompts/orchestrator/official_*.j2``), offers only the agents and argument tags the checkpoints
know (no ``python``, no ``n_samples``/``rounds``), and lets a user load their own copy of the
official templates with :func:`load_prompt_file`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.backends.base import Message
from masorch.errors import UsageError
from masorch.files import MAX_YAML_BYTES, load_yaml_file
from masorch.plan import DoM
from masorch.plan.catalogue import KindSignature
from masorch.plan.parse_xml import KIND_TO_NAME, PARAM_TO_ARG
from masorch.prompts import render

#: The kinds each DoM's official prompts offer, in the order they list them.
OFFICIAL_KINDS: dict[DoM, tuple[str, ...]] = {
    DoM.LOW: ("cot", "sc", "debate", "reflexion"),
    DoM.HIGH: ("cot", "sc", "debate", "reflexion", "search"),
}
#: Families whose prompts offer fewer kinds: the MASBench arithmetic prompts list only CoT.
FAMILY_KINDS: dict[str, tuple[str, ...]] = {"masbench": ("cot",)}
#: The argument tags the official prompts ask for, per kind (beside ``agent_input``).
OFFICIAL_ARGS: dict[str, tuple[str, ...]] = {"debate": ("roles",)}
#: The placeholders of the official developer template -> the kind whose description replaces it.
AGENT_PLACEHOLDERS: dict[str, str] = {
    "[COT]": "cot",
    "[COT_SC]": "sc",
    "[Debate]": "debate",
    "[Reflexion]": "reflexion",
    "[Websearch]": "search",
}
#: The three messages of a prompt file, in the order they are sent (the developer block last).
PROMPT_KEYS: tuple[str, ...] = ("system", "user", "developer")


@dataclass(frozen=True)
class PromptFile:
    """A user's copy of the official templates for one DoM: the system, user and developer texts.

    Placeholders, as in the official templates: ``[QUESTION]`` (user), ``[MODEL]`` (system) and
    the agent placeholders of :data:`AGENT_PLACEHOLDERS` (developer).
    """

    system: str
    user: str
    developer: str


def official_catalogue(
    catalogue: Mapping[str, KindSignature], dom: DoM, family: str = "general"
) -> dict[str, KindSignature]:
    """The kinds of ``catalogue`` the official prompts of ``dom`` and task ``family`` offer, in
    their order.

    Signatures stay whole: the prompt names only :data:`OFFICIAL_ARGS`, but a plan that sets
    another parameter (``<n_samples>``) is still read and checked as in every other profile."""
    kinds = FAMILY_KINDS.get(family, OFFICIAL_KINDS[dom])
    return {kind: catalogue[kind] for kind in kinds if kind in catalogue}


def load_prompt_file(path: str | Path, dom: DoM) -> PromptFile:
    """The templates in the YAML file ``path``: ``system``, ``user`` and ``developer`` strings,
    at the top level or under ``low:`` / ``high:`` (the entry of ``dom`` is used)."""
    data = load_yaml_file(path, what="prompt file", max_bytes=MAX_YAML_BYTES)
    if isinstance(data, Mapping) and isinstance(data.get(dom.value), Mapping):
        data = data[dom.value]
    if not isinstance(data, Mapping):
        raise UsageError(f"prompt file {path} is not a mapping", hint=_FILE_HINT)
    missing = [k for k in PROMPT_KEYS if not isinstance(data.get(k), str) or not data[k].strip()]
    if missing:
        raise UsageError(f"prompt file {path} lacks the texts: {', '.join(missing)}", hint=_FILE_HINT)
    unknown = sorted(set(map(str, data)) - set(PROMPT_KEYS) - {"low", "high"})
    if unknown:
        raise UsageError(f"prompt file {path} has unknown keys: {', '.join(unknown)}", hint=_FILE_HINT)
    if "[QUESTION]" not in data["user"]:
        raise UsageError(f"the user text of prompt file {path} has no [QUESTION]", hint=_FILE_HINT)
    return PromptFile(system=data["system"], user=data["user"], developer=data["developer"])


_FILE_HINT = (
    "write `system: |`, `user: |` (with [QUESTION]) and `developer: |` texts, optionally under "
    "`low:` and `high:`; see docs/run.md"
)


def model_name(spec: str) -> str:
    """The model name a prompt shows for a model string: ``vllm:http://h:8000/v1#qwen-7b`` ->
    ``qwen-7b``, ``openai:gpt-4.1-nano`` -> ``gpt-4.1-nano`` (never a URL, which may hold a key).

    >>> model_name("vllm:http://127.0.0.1:8000/v1#gpt-oss-120b"), model_name("local:qwen2.5-coder-0.5b")
    ('gpt-oss-120b', 'qwen2.5-coder-0.5b')
    """
    name = spec.rpartition("#")[2] if "#" in spec else spec.partition(":")[2] or spec
    return name if "://" not in name else "the sub-agent model"


def official_messages(
    question: str,
    catalogue: Mapping[str, KindSignature],
    dom: DoM,
    *,
    model: str,
    family: str = "general",
    prompt_file: PromptFile | None = None,
) -> list[Message]:
    """The three messages of the official layout: system, user (rules, examples, question) and
    the developer block as a second user message, as the checkpoints were trained.

    ``catalogue`` is the offered one (:func:`official_catalogue` narrows it); ``model`` names the
    sub-agents' model; ``family`` is the task family (``general``, ``choice``, ``masbench``);
    ``prompt_file`` replaces masorch's texts with a user's copy.
    """
    agents = [_agent(catalogue[kind]) for kind in official_catalogue(catalogue, dom, family)]
    if prompt_file is not None:
        described = {a["kind"]: a["json"] for a in agents}
        developer = prompt_file.developer
        for placeholder, kind in AGENT_PLACEHOLDERS.items():
            developer = developer.replace(placeholder, described.get(kind, "(not available in this run)"))
        return [
            Message("system", prompt_file.system.replace("[MODEL]", model)),
            Message("user", prompt_file.user.replace("[QUESTION]", question)),
            Message("user", developer),
        ]
    names = [a["name"] for a in agents]
    level = "minimal" if dom is DoM.LOW else "medium"
    system = render("orchestrator/official_system.j2", level=level, model=model)
    user = render(f"orchestrator/official_user_{dom.value}.j2", names=names, question=question, family=family)
    developer = render("orchestrator/official_developer.j2", level=level, model=model, agents=agents)
    return [Message("system", system), Message("user", user), Message("user", developer)]


def _agent(sig: KindSignature) -> dict[str, Any]:
    """One agent as the developer block lists it: its trained name and a JSON description (texts
    from ``prompts/orchestrator/official_agents.j2``; fixed settings from the run's signature)."""
    about = json.loads(render("orchestrator/official_agents.j2", kind=sig.kind))
    keep = OFFICIAL_ARGS.get(sig.kind, ())
    arguments = {"agent_input": about["agent_input"]}
    arguments.update({PARAM_TO_ARG.get(n, n): about[n] for n in keep})
    entry = {
        "name": about["title"],
        "description": about["description"],
        "required_arguments": arguments,
        "fixed_settings": {p.name: p.default for p in sig.params if p.name not in keep},
    }
    name = KIND_TO_NAME.get(sig.kind, sig.kind.capitalize() + "Agent")
    return {"kind": sig.kind, "name": name, "json": json.dumps(entry, ensure_ascii=False)}
