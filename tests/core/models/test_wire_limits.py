"""Exact lengths and boundaries of the wire rules: previews, caps, defaults.

Each test names a value a one-token change to ``_wire`` would move (a preview of 200 or
300 characters, ``>`` against ``>=`` at a cap, the default ``index`` of a choice, the
size a streamed call starts from), so mutation testing finds them pinned.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from beamfilter_core import ChatRequest, Message
from beamfilter_core._models._wire import StreamAccumulator, loads, parse_completion, preview, request_body
from beamfilter_core.errors import IncompleteStreamError, ProviderResponseError, ResponseTooLargeError

# -- previews in error messages ----------------------------------------------------------------


def test_preview_keeps_200_characters_and_cuts_201() -> None:
    exactly = "x" * 198  # its JSON, with the two quotes, is 200 characters
    assert preview(exactly) == json.dumps(exactly)
    longer = "x" * 199
    assert preview(longer) == '"' + "x" * 199 + "..."
    assert preview("x" * 298, 300) == json.dumps("x" * 298)
    assert preview("x" * 299, 300) == '"' + "x" * 299 + "..."


def test_preview_never_fails() -> None:
    circular: list[Any] = []
    circular.append(circular)
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert preview(object()) == "<object>"  # TypeError
    assert preview(circular) == "<list>"  # ValueError: circular reference
    assert preview(deep) == "<list>"  # RecursionError
    assert preview({"é": 1}) == '{"é": 1}'  # not ASCII-escaped


def test_loads_shows_the_first_200_characters_of_text_or_bytes() -> None:
    text = "{" + "a" * 300
    with pytest.raises(ProviderResponseError) as caught:
        loads(text, "Bad body")
    assert str(caught.value) == f"Bad body: {text[:200]!r}."
    with pytest.raises(ProviderResponseError) as caught:
        loads(text.encode() + b"\xff", "Bad body")
    assert str(caught.value) == f"Bad body: {text[:200]!r}."
    with pytest.raises(ProviderResponseError) as caught:
        loads(b"{\xff", "Bad body")
    assert str(caught.value) == "Bad body: '{\ufffd'."


def test_loads_reports_json_nested_too_deeply() -> None:
    with pytest.raises(ProviderResponseError) as caught:
        loads("[" * 100_000 + "]" * 100_000, "Deep")
    assert str(caught.value) == "Deep (nested too deeply to decode): " + repr("[" * 200) + "."
    assert caught.value.__cause__ is None


def test_a_chunk_that_is_not_an_object_shows_its_first_200_characters() -> None:
    data = json.dumps(["y" * 300])
    with pytest.raises(ProviderResponseError) as caught:
        StreamAccumulator(None).feed(data)
    assert str(caught.value) == f"The stream sent a chunk that is not a JSON object: {data[:200]!r}."


def test_a_server_error_shows_300_characters_of_its_message() -> None:
    message = "m" * 400
    with pytest.raises(ProviderResponseError) as caught:
        parse_completion({"error": {"message": message}})
    assert str(caught.value) == f"The server reported an error inside a 200 response: {message[:300]!r}."
    error = ["c" * 400]  # neither an object with a message nor a string
    with pytest.raises(ProviderResponseError) as caught:
        StreamAccumulator(None).feed(json.dumps({"error": error, "choices": []}))
    shown = json.dumps(error)[:300] + "..."
    assert str(caught.value) == f"The server reported an error inside a 200 response: {shown}."


def test_an_error_next_to_choices_is_ignored() -> None:
    data = {"error": "ignored", "choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}]}
    assert parse_completion(data).text == "fine"


def test_broken_completions_show_300_characters() -> None:
    long = "z" * 400
    with pytest.raises(ProviderResponseError) as caught:
        parse_completion({"choices": [], "id": long})
    shown = json.dumps({"choices": [], "id": long})[:300] + "..."
    assert str(caught.value) == f"The completion has no choices: {shown}."
    with pytest.raises(ProviderResponseError) as caught:
        parse_completion({"choices": [{"index": 0, "text": long}]})
    shown = json.dumps({"index": 0, "text": long})[:300] + "..."
    assert str(caught.value) == f"The completion's first choice has no message: {shown}."
    with pytest.raises(ProviderResponseError) as caught:
        parse_completion([long])
    shown = json.dumps([long])[:200] + "..."
    assert str(caught.value) == f"Expected a JSON object from /chat/completions, got list: {shown}."


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"choices": [{"message": {"content": 5}}]},
            "message.content as int 5; expected a string, null or a list of text parts.",
        ),
        (
            {"choices": [{"message": {"content": "x"}, "finish_reason": 1}]},
            "finish_reason as int 1; expected a string or null.",
        ),
        (
            {"choices": [{"message": {"tool_calls": {}}}]},
            "message.tool_calls as dict {}; expected a JSON array or null.",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": 3}]}}]},
            "message.tool_calls[0].function as int 3; expected a JSON object or null.",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": {"name": 3}}]}}]},
            "message.tool_calls[0].function.name as int 3; expected a string or null.",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"id": 7, "function": {"name": "a"}}]}}]},
            "message.tool_calls[0].id as int 7; expected a string or null.",
        ),
    ],
)
def test_malformed_fields_are_named_with_what_was_expected(value: Any, message: str) -> None:
    with pytest.raises(ProviderResponseError) as caught:
        parse_completion(value)
    assert str(caught.value) == "The server sent " + message


def test_a_null_function_reads_as_an_empty_one() -> None:
    data = {"choices": [{"message": {"tool_calls": [{"id": "c1", "function": None}]}}]}
    (call,) = parse_completion(data).message.tool_calls
    assert (call.id, call.name, call.arguments) == ("c1", "", {})


# -- caps: at the limit passes, one over raises --------------------------------------------------


def _completion(content: str | None, *arguments: str) -> dict[str, Any]:
    calls = [{"id": f"c{i}", "function": {"name": "f", "arguments": a}} for i, a in enumerate(arguments)]
    message: dict[str, Any] = {"content": content, "tool_calls": calls}
    return {"choices": [{"message": message, "finish_reason": "stop"}]}


def test_a_completion_at_its_caps_is_accepted_and_one_more_character_is_not() -> None:
    arguments = '{"a": "' + "x" * 13 + '"}'  # 22 characters
    assert len(arguments) == 22
    response = parse_completion(_completion("hello", arguments), max_answer_chars=27, max_argument_chars=22)
    assert response.message.tool_calls[0].arguments == {"a": "x" * 13}
    with pytest.raises(ResponseTooLargeError) as caught:
        parse_completion(_completion("hello", arguments), max_answer_chars=27, max_argument_chars=21)
    assert str(caught.value) == (
        "The arguments of tool call 'f' are longer than max_argument_chars=21; "
        "raise the limit if such answers are expected."
    )
    with pytest.raises(ResponseTooLargeError) as caught:
        parse_completion(_completion("hello", arguments), max_answer_chars=26, max_argument_chars=22)
    assert str(caught.value) == (
        "The answer (text and tool arguments) is longer than max_answer_chars=26; "
        "raise the limit if such answers are expected."
    )


def test_the_answer_cap_counts_text_and_every_call() -> None:
    parse_completion(_completion("ab", "{}", "{}"), max_answer_chars=6, max_argument_chars=2)
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=5;"):
        parse_completion(_completion("ab", "{}", "{}"), max_answer_chars=5, max_argument_chars=2)
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=1;"):
        parse_completion(_completion(None, "{}"), max_answer_chars=1)
    refusal = {"choices": [{"message": {"content": None, "refusal": "no way"}}]}
    assert parse_completion(refusal, max_answer_chars=6 + 1).text == "no way"
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=5;"):
        parse_completion(refusal, max_answer_chars=5)


def _stream(*chunks: dict[str, Any], max_answer_chars: int, max_argument_chars: int) -> StreamAccumulator:
    stream = StreamAccumulator(None, max_answer_chars=max_answer_chars, max_argument_chars=max_argument_chars)
    for chunk in chunks:
        stream.feed(json.dumps(chunk))
    return stream


def _call_delta(index: int, arguments: str, name: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": function}]}}]}


def test_a_streamed_call_at_its_caps_is_accepted_and_one_more_character_is_not() -> None:
    pieces = (_call_delta(0, '{"a"', "f"), _call_delta(0, ": 1}"))  # 8 characters in two pieces
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    stream = _stream(*pieces, end, max_answer_chars=8, max_argument_chars=8)
    stream.feed("[DONE]")
    assert stream.result(chunks=4).message.tool_calls[0].arguments == {"a": 1}
    with pytest.raises(ResponseTooLargeError) as caught:
        _stream(*pieces, max_answer_chars=100, max_argument_chars=7)
    assert str(caught.value) == (
        "The arguments of tool call 'f' are longer than max_argument_chars=7; "
        "raise the limit if such answers are expected."
    )
    with pytest.raises(ResponseTooLargeError) as caught:
        _stream(*pieces, max_answer_chars=7, max_argument_chars=8)
    assert str(caught.value).startswith("The answer (text and tool arguments) is longer than max_answer_chars=7;")


def test_each_streamed_call_has_its_own_argument_cap_and_a_nameless_call_is_named_by_index() -> None:
    stream = _stream(
        _call_delta(0, "{}", "f"),
        _call_delta(1, "{}", "g"),
        _call_delta(2, "{}", "h"),
        max_answer_chars=6,
        max_argument_chars=2,
    )
    assert stream.text == ""
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=6;"):
        stream.feed(json.dumps(_call_delta(3, "{}", "i")))
    with pytest.raises(ResponseTooLargeError) as caught:
        _stream(_call_delta(4, "{}"), _call_delta(4, "1"), max_answer_chars=100, max_argument_chars=2)
    assert "tool call '4' are longer than max_argument_chars=2" in str(caught.value)


def test_streamed_text_counts_against_the_answer_cap_at_the_exact_limit() -> None:
    tokens: list[str] = []
    stream = StreamAccumulator(tokens.append, max_answer_chars=5, max_argument_chars=5)
    assert stream.delivered is False
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "abc"}}]}))
    assert stream.delivered is True
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "de"}}]}))
    assert tokens == ["abc", "de"]
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=5;"):
        stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "f"}}]}))
    assert tokens == ["abc", "de"]  # the token over the cap is never delivered


def test_a_stream_without_a_token_sink_delivers_nothing() -> None:
    stream = StreamAccumulator(None)
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "abc"}}]}))
    assert (stream.delivered, stream.text) == (False, "abc")


# -- the index of choices and streamed calls ------------------------------------------------------


def test_a_completion_takes_the_first_choice_without_index_as_choice_zero() -> None:
    data = {
        "choices": [
            {"index": 2, "message": {"content": "two"}},
            {"message": {"content": "no index"}},
            {"index": 0, "message": {"content": "zero"}},
        ]
    }
    assert parse_completion(data).text == "no index"
    only_others = {
        "choices": [{"index": 3, "message": {"content": "three"}}, {"index": 1, "message": {"content": "one"}}]
    }
    assert parse_completion(only_others).text == "three"  # no choice 0: the first one


def test_a_call_without_index_and_with_a_new_id_never_joins_an_earlier_call() -> None:
    stream = StreamAccumulator(None)
    first = {"id": "a", "function": {"name": "f", "arguments": "{}"}}
    second = {"id": "b", "function": {"name": "g", "arguments": "{"}}
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [first, second]}}]}))
    # a piece without id continues the last call
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": "}"}}]}}]}))
    third = {"id": "c", "function": {"name": "h", "arguments": "{}"}}
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [third]}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    stream.feed("[DONE]")
    calls = stream.result(chunks=5).message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "f", {}), ("b", "g", {}), ("c", "h", {})]


def test_a_nameless_call_without_index_is_named_by_the_next_free_index() -> None:
    stream = StreamAccumulator(None, max_argument_chars=2)
    deltas = [{"id": "a", "function": {"arguments": "{}"}}, {"id": "b", "function": {"arguments": "{}"}}]
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": deltas}}]}))
    with pytest.raises(ResponseTooLargeError) as caught:
        stream.feed(
            json.dumps(
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "c", "function": {"arguments": "{}}"}}]}}]}
            )
        )
    assert str(caught.value).startswith("The arguments of tool call '2' are longer than max_argument_chars=2;")
    first = StreamAccumulator(None, max_argument_chars=2)
    with pytest.raises(ResponseTooLargeError, match="tool call '0' are longer"):
        first.feed(
            json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": "{ }"}}]}}]})
        )


def test_a_first_call_without_index_or_id_starts_at_zero() -> None:
    stream = StreamAccumulator(None)
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": "f"}}]}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls"}]}))
    stream.feed("[DONE]")
    (call,) = stream.result(chunks=4).message.tool_calls
    assert (call.name, call.arguments) == ("f", {})


def test_the_incomplete_stream_message_names_what_is_missing() -> None:
    stream = StreamAccumulator(None)
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "abc"}}]}))
    with pytest.raises(IncompleteStreamError) as caught:
        stream.result(chunks=1)
    assert str(caught.value) == (
        "The stream ended after 1 chunk(s) without finish_reason and [DONE]; "
        "the answer is incomplete (3 characters of text received)."
    )
    stream.feed("[DONE]")
    with pytest.raises(IncompleteStreamError) as caught:
        stream.result(chunks=2)
    assert "without finish_reason;" in str(caught.value)
    done = StreamAccumulator(None)
    done.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    with pytest.raises(IncompleteStreamError) as caught:
        done.result(chunks=1)
    assert "without [DONE];" in str(caught.value)


# -- signatures: the data by position or name, the bounds by name only --------------------------


def test_the_bounds_are_keyword_only_and_the_data_may_be_named() -> None:
    data = {"choices": [{"message": {"content": "hi"}}]}
    assert parse_completion(data=data, max_answer_chars=2).text == "hi"
    with pytest.raises(TypeError, match="positional argument"):
        parse_completion(data, 2)  # type: ignore[misc]
    stream = StreamAccumulator(on_token=None, max_answer_chars=2, max_argument_chars=1)
    assert (stream.delivered, stream.done, stream.finish_reason, stream.usage) == (False, False, None, None)
    with pytest.raises(TypeError, match="positional argument"):
        StreamAccumulator(None, 2)  # type: ignore[misc]
    request = ChatRequest(messages=(Message.user("hi"),))
    body = request_body(request=request, model="m", options={}, stream=False)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(TypeError, match="positional argument"):
        request_body(request, "m", {}, False)  # type: ignore[misc]


# -- content, refusal and choices -----------------------------------------------------------------


def _text_of(content: Any) -> str:
    return parse_completion({"choices": [{"message": {"content": content}}]}).text


def test_content_given_as_text_parts_is_joined() -> None:
    assert _text_of([{"type": "text", "text": "a"}, {"type": "image_url"}, {"text": "b"}]) == "ab"
    assert _text_of([]) == ""
    for content in (["x"], [{"text": 5}], [{"text": "a"}, 5]):
        with pytest.raises(ProviderResponseError) as caught:
            _text_of(content)
        assert str(caught.value) == (
            f"The server sent message.content as list {json.dumps(content)}; "
            "expected a string, null or a list of text parts."
        )


def test_the_refusal_is_the_text_only_when_there_is_no_content() -> None:
    both = {"choices": [{"message": {"content": "answer", "refusal": "no"}}]}
    assert parse_completion(both).text == "answer"
    only = {"choices": [{"message": {"content": None, "refusal": "no"}}]}
    assert parse_completion(only).text == "no"
    odd = {"choices": [{"message": {"content": None, "refusal": 5}}]}
    assert parse_completion(odd).message.content is None


def test_a_streamed_refusal_is_the_text_only_when_there_is_no_content() -> None:
    tokens: list[str] = []
    stream = StreamAccumulator(tokens.append)
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"refusal": "I can"}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": None, "refusal": "not"}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "!", "refusal": "ignored"}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    stream.feed("[DONE]")
    assert (stream.result(chunks=5).text, tokens) == ("I cannot!", ["I can", "not", "!"])


def test_a_non_object_choice_is_passed_over_for_choice_zero() -> None:
    data = {"choices": [5, {"index": 0, "message": {"content": "zero"}}]}
    assert parse_completion(data).text == "zero"
    with pytest.raises(ProviderResponseError) as caught:
        parse_completion({"choices": [5]})
    assert str(caught.value) == "The completion's first choice has no message: 5."


def test_pieces_without_index_repeating_the_id_of_the_last_call_join_it() -> None:
    stream = StreamAccumulator(None)
    for piece in ('{"a"', ": 1", "}"):
        fragment = {"id": "a", "function": {"name": "f", "arguments": piece}}
        stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    stream.feed("[DONE]")
    (call,) = stream.result(chunks=4).message.tool_calls
    assert (call.id, call.name, call.arguments) == ("a", "f", {"a": 1})


def test_the_default_caps_are_four_million_and_one_million_characters() -> None:
    assert parse_completion(_completion("x" * 4_000_000)).text == "x" * 4_000_000
    with pytest.raises(ResponseTooLargeError, match=r"max_answer_chars=4000000;"):
        parse_completion(_completion("x" * 4_000_001))
    arguments = '"' + "x" * 999_998 + '"'
    assert parse_completion(_completion(None, arguments)).message.tool_calls[0].raw_arguments == arguments
    with pytest.raises(ResponseTooLargeError, match=r"max_argument_chars=1000000;"):
        parse_completion(_completion(None, arguments + " "))
    stream = StreamAccumulator(None)
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 4_000_000}}]}))
    with pytest.raises(ResponseTooLargeError, match=r"max_answer_chars=4000000;"):
        stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "x"}}]}))
    calls = StreamAccumulator(None)
    calls.feed(json.dumps(_call_delta(0, arguments, "f")))
    with pytest.raises(ResponseTooLargeError, match=r"max_argument_chars=1000000;"):
        calls.feed(json.dumps(_call_delta(0, " ")))


def test_an_empty_streamed_answer_has_empty_text_and_one_with_only_calls_has_none() -> None:
    empty = StreamAccumulator(None)
    empty.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    empty.feed("[DONE]")
    assert empty.result(chunks=2).message.content == ""
    calls = _stream(_call_delta(0, "{}", "f"), max_answer_chars=10, max_argument_chars=10)
    calls.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    calls.feed("[DONE]")
    assert calls.result(chunks=3).message.content is None


# -- what the last mutation run of _wire found unpinned -------------------------------------------


def test_object_arguments_are_measured_as_unescaped_json() -> None:
    # A server that sends the arguments as an object: they are measured as the JSON text a
    # string would have carried, not ASCII-escaped (é is one character, not six)
    value = {"city": "Zürich", "note": "é" * 20}
    cap = len(json.dumps(value, ensure_ascii=False))
    data = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": value}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    assert parse_completion(data, max_argument_chars=cap).message.tool_calls[0].arguments == value
    with pytest.raises(ResponseTooLargeError):
        parse_completion(data, max_argument_chars=cap - 1)


def test_a_streamed_chunk_with_another_choice_first_still_feeds_choice_0() -> None:
    stream = StreamAccumulator(None)
    chunk = {"choices": [{"index": 1, "delta": {"content": "B"}}, {"index": 0, "delta": {"content": "A"}}]}
    stream.feed(json.dumps(chunk))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "C"}, "finish_reason": "stop"}]}))
    stream.feed("[DONE]")
    assert stream.text == "AC"
    assert stream.result(chunks=2).message.content == "AC"


def test_a_stream_result_takes_its_chunk_count_by_name_only() -> None:
    stream = StreamAccumulator(None)
    stream.feed("[DONE]")
    with pytest.raises(TypeError):
        stream.result(1)  # type: ignore[misc]
