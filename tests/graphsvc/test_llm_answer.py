"""Model answers are parsed as JSON, and only JSON: NaN and Infinity, which Python's parser would accept, are
refused, so a non-finite confidence can never reach a stored row."""

from __future__ import annotations

import pytest

from graphsvc.llm import parse_json_answer


def test_it_reads_an_object_wrapped_in_a_fence_or_prose():
    assert parse_json_answer('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_answer('Here it is: {"a": [1, 2]} hope it helps') == {"a": [1, 2]}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_it_refuses_numbers_json_does_not_have(constant):
    with pytest.raises(ValueError, match="not a JSON number"):
        parse_json_answer(f'{{"confidence": {constant}}}')
    with pytest.raises(ValueError, match="not a JSON number"):
        parse_json_answer(f'Sure! {{"confidence": {constant}}} done')
