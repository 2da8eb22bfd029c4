"""A plan grammar in the request: each server's field, free decoding with a notice where none."""

from __future__ import annotations

import logging

import pytest

from masorch.backends.base import GenerateConfig, Message
from masorch.backends.cache import cache_key
from masorch.backends.loopback import LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend
from masorch.errors import UsageError

pytestmark = pytest.mark.timeout(60)

ASK = [Message("user", "plan")]
GRAMMAR = 'root ::= "create_agent(id=\\"a\\", kind=\\"cot\\", task=\\"\\")\\n"'


@pytest.mark.parametrize(
    ("fmt", "field", "value"),
    [
        ("llama.cpp", "grammar", GRAMMAR),
        ("vllm", "structured_outputs", {"grammar": GRAMMAR}),
        ("vllm-guided", "guided_grammar", GRAMMAR),
    ],
)
async def test_the_grammar_goes_in_each_servers_field(fmt: str, field: str, value: object) -> None:
    with LoopbackServer() as server:
        b = OpenAIBackend("m", base_url=server.base_url, grammar_format=fmt)  # type: ignore[arg-type]
        await b.complete(ASK, GenerateConfig(grammar=GRAMMAR))
        await b.complete(ASK, GenerateConfig())
        await b.aclose()
    with_grammar, without = server.bodies
    assert with_grammar[field] == value
    assert field not in without and "response_format" not in with_grammar


async def test_a_server_without_grammars_decodes_freely_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with LoopbackServer() as server, caplog.at_level(logging.INFO, "masorch.backends.openai_compat"):
        b = OpenAIBackend("m", base_url=server.base_url)
        for _ in range(2):
            await b.complete(ASK, GenerateConfig(grammar=GRAMMAR))
        await b.aclose()
    assert all("grammar" not in body and "structured_outputs" not in body for body in server.bodies)
    assert [r.getMessage() for r in caplog.records].count(
        "openai:m: the server takes no grammar (grammar_format is not set); plans decode freely"
    ) == 1


def test_unknown_grammar_format_and_the_cache_key() -> None:
    with pytest.raises(UsageError, match="grammar format"):
        OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", grammar_format="lark")  # type: ignore[arg-type]
    plain = cache_key("m", ASK, GenerateConfig())
    assert "grammar" not in GenerateConfig().cache_key_fields()  # keys recorded before grammars hold
    assert cache_key("m", ASK, GenerateConfig(grammar=GRAMMAR)) != plain
    assert cache_key("m", ASK, GenerateConfig(grammar=GRAMMAR + " ")) != cache_key(
        "m", ASK, GenerateConfig(grammar=GRAMMAR)
    )
