"""llguidance (which constrains ``hf:`` policies) reads the GBNF grammars as llama.cpp is meant to:
it accepts every string sampled from each grammar and the handwritten valid ones, and refuses the
handwritten invalid ones, as the test recognizer (gbnf.py) does."""

from __future__ import annotations

import functools
import random
from typing import Any

import gbnf
import pytest
from test_grammar import INVALID_CALLS, VALID_CALLS_HIGH, VALID_CALLS_LOW
from test_tool_turn_grammar import INVALID_TURNS, POOL, VALID_TURNS

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import DoM
from masorch.plan.grammar import plan_grammar, tool_turn_grammar

pytest.importorskip("llguidance")
pytest.importorskip("transformers")

GRAMMARS = {
    "calls-high": lambda: plan_grammar("calls", builtin_catalogue(), DoM.HIGH),
    "calls-low": lambda: plan_grammar("calls", builtin_catalogue(), DoM.LOW),
    "xml-high": lambda: plan_grammar("xml", builtin_catalogue(), DoM.HIGH),
    "xml-low": lambda: plan_grammar("xml", builtin_catalogue(), DoM.LOW),
    "turn": lambda: tool_turn_grammar(builtin_catalogue(), pool=POOL),
}


@functools.cache
def _index() -> Any:
    """A byte-level tokenizer (one token a byte) as llguidance sees it, so any text is one
    token sequence and acceptance is the grammar's alone."""
    from masorch.backends.hf_grammar import TokenIndex
    from tiny_models import byte_tokenizer

    tok = byte_tokenizer({"eos_token": "<|im_end|>"})
    return tok, TokenIndex(tok, vocab_size=len(tok), end_ids=[tok.eos_token_id])


def _accepts(name: str, text: str) -> bool:
    from masorch.backends.hf_grammar import constraint_text, new_matcher

    tok, index = _index()
    matcher = new_matcher(index, constraint_text(GRAMMARS[name](), None, index.special))
    ids = tok.encode(text, add_special_tokens=False)
    return bool(matcher.consume_tokens(ids) and matcher.is_accepting())


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_every_sampled_string_is_accepted(name: str) -> None:
    rules, rng = gbnf.read(GRAMMARS[name]()), random.Random(11)
    for _ in range(25):
        text = gbnf.sample(rules, rng)
        assert _accepts(name, text), text


@pytest.mark.parametrize(
    ("name", "text"),
    [
        *(("calls-high", t) for t in VALID_CALLS_HIGH),
        *(("calls-low", t) for t in VALID_CALLS_LOW),
        *(("turn", t) for t in VALID_TURNS),
    ],
)
def test_handwritten_valid_text_is_accepted(name: str, text: str) -> None:
    rules = gbnf.read(GRAMMARS[name]())
    assert gbnf.matches(rules, text) == _accepts(name, text)
    assert _accepts(name, text), text


@pytest.mark.parametrize(
    ("name", "text"),
    [*((f"calls-{dom}", t) for dom, t in INVALID_CALLS), *(("turn", t) for t, _why in INVALID_TURNS)],
)
def test_handwritten_invalid_text_is_refused(name: str, text: str) -> None:
    assert not _accepts(name, text), text
