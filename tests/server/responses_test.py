"""The OpenAI Responses API (/v1/responses) through the official Python client, against a running
flashserve.

Usage: responses_test.py BASE_URL MODEL

Judges the protocol, not answer quality (the model is tiny): responses.create with text and message
input and instructions; responses.stream, whose events and final response must match create at
temperature 0; a forced function call and its function_call_output round trip, both by
previous_response_id and by sending the whole conversation; text.format json_schema through
responses.parse with a pydantic model; previous_response_id keeping the conversation and cached
tokens in usage; retrieve and delete; refusals naming the field. Exits non-zero on the first failure.
"""

import json
import sys

import jsonschema
import openai
from openai import OpenAI
from pydantic import BaseModel, Field
from sdk_checks import check

QUESTION = "What is the capital of France?"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    "strict": True,
}


class City(BaseModel):
    name: str = Field(max_length=40)
    population: int = Field(ge=0, le=100_000_000)


def check_usage(usage, max_output):
    check(usage.input_tokens > 0, f"input_tokens {usage.input_tokens}")
    check(0 < usage.output_tokens <= max_output, f"output_tokens {usage.output_tokens}")
    check(usage.total_tokens == usage.input_tokens + usage.output_tokens, "total_tokens is not the sum")
    check(usage.input_tokens_details.cached_tokens >= 0, "cached_tokens")


def text_and_messages(client, model):
    r = client.responses.create(model=model, input=QUESTION, instructions="Answer in one sentence.",
                                max_output_tokens=24, temperature=0)
    check(r.object == "response" and r.id.startswith("resp_"), f"object {r.object} id {r.id}")
    check(r.status in ("completed", "incomplete"), f"status {r.status}")
    check(r.model == model and r.instructions == "Answer in one sentence.", "echoed settings")
    check(len(r.output) == 1 and r.output[0].type == "message" and r.output[0].role == "assistant", "one message")
    check(r.output_text.strip() != "", "empty output_text")
    check_usage(r.usage, 24)
    if r.status == "incomplete":
        check(r.incomplete_details.reason == "max_output_tokens", "incomplete_details")
    items = client.responses.create(
        model=model, max_output_tokens=24, temperature=0, instructions="Answer in one sentence.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}])
    check(items.output_text == r.output_text, "message input and string input differ")
    print(f"create: {r.status}, {r.usage.output_tokens} tokens: {r.output_text!r}")
    return r


def streamed(client, model, created):
    with client.responses.stream(model=model, input=QUESTION, instructions="Answer in one sentence.",
                                 max_output_tokens=24, temperature=0) as stream:
        types, deltas = [], ""
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                deltas += event.delta
            check(event.sequence_number == len(types) - 1, f"sequence_number {event.sequence_number}")
        if created.status == "completed":
            final = stream.get_final_response()
            check(final.output_text == created.output_text, "stream and create differ")
    check(types[:2] == ["response.created", "response.in_progress"], f"opening events {types[:2]}")
    check(types[-1] == ("response.completed" if created.status == "completed" else "response.incomplete"),
          f"last event {types[-1]}")
    for t in ("response.output_item.added", "response.content_part.added", "response.output_text.done",
              "response.content_part.done", "response.output_item.done"):
        check(t in types, f"no {t}")
    check(deltas == created.output_text, "deltas do not add up to the text")
    print(f"stream: {len(types)} events, same text as create")


def function_calls(client, model):
    r = client.responses.create(model=model, input="What is the weather in Paris?", tools=[WEATHER],
                                tool_choice="required", parallel_tool_calls=False, temperature=0,
                                max_output_tokens=64)
    calls = [o for o in r.output if o.type == "function_call"]
    check(len(calls) >= 1, f"no function call: {r.output}")
    call = calls[0]
    check(call.name == "get_weather" and call.call_id.startswith("call_") and call.id.startswith("fc_"), "call shape")
    jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])
    check(r.status == "completed", f"status {r.status}")

    # The round trip by previous_response_id: only the tool's output is sent.
    answer = client.responses.create(model=model, previous_response_id=r.id, tools=[WEATHER], temperature=0,
                                     max_output_tokens=32,
                                     input=[{"type": "function_call_output", "call_id": call.call_id,
                                             "output": '{"temperature": 18, "sky": "clear"}'}])
    check(answer.previous_response_id == r.id, "previous_response_id not echoed")
    check(answer.output_text.strip() != "" or any(o.type == "function_call" for o in answer.output), "no answer")
    check(answer.usage.input_tokens_details.cached_tokens > 0,
          "the continued conversation found nothing in the prefix cache")

    # The same round trip with the whole conversation as input (store off).
    whole = client.responses.create(model=model, tools=[WEATHER], temperature=0, max_output_tokens=32, store=False,
                                    input=[{"role": "user", "content": "What is the weather in Paris?"},
                                           {"type": "function_call", "call_id": call.call_id, "name": call.name,
                                            "arguments": call.arguments},
                                           {"type": "function_call_output", "call_id": call.call_id,
                                            "output": '{"temperature": 18, "sky": "clear"}'}])
    check(whole.output_text == answer.output_text, "whole-conversation input and previous_response_id differ")
    check(whole.store is False, "store not echoed")

    with client.responses.stream(model=model, input="Weather in Rome?", tools=[WEATHER],
                                 tool_choice={"type": "function", "name": "get_weather"}, temperature=0.7,
                                 max_output_tokens=64, extra_body={"seed": 3}) as stream:
        args = "".join(e.delta for e in stream if e.type == "response.function_call_arguments.delta")
        final = stream.get_final_response()
    streamed_call = [o for o in final.output if o.type == "function_call"][0]
    check(streamed_call.arguments == args, "argument deltas do not add up")
    jsonschema.validate(json.loads(args), WEATHER["parameters"])
    print(f"function calls: {call.arguments}, round trip answered {answer.output_text!r}, streamed {args}")


def structured(client, model):
    for seed in (1, 2, 3):
        r = client.responses.parse(model=model, input="Name a big city and its population.", text_format=City,
                                   temperature=0.8, max_output_tokens=200,
                                   extra_body={"seed": seed})
        check(isinstance(r.output_parsed, City), f"output_parsed {r.output_parsed!r}")
    print(f"parse: {r.output_parsed!r}")


def conversation(client, model):
    first = client.responses.create(model=model, input="My name is Ada. Say hello.", temperature=0,
                                    max_output_tokens=16)
    second = client.responses.create(model=model, previous_response_id=first.id, input="What is my name?",
                                     temperature=0, max_output_tokens=16)
    check(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens,
          "the second turn's prompt does not hold the first")
    got = client.responses.retrieve(second.id)
    check(got.id == second.id and got.output_text == second.output_text, "retrieve differs")
    client.responses.delete(second.id)
    try:
        client.responses.retrieve(second.id)
        raise AssertionError("a deleted response was still there")
    except openai.NotFoundError:
        pass
    try:
        client.responses.create(model=model, previous_response_id=second.id, input="Again?")
        raise AssertionError("continuing a deleted response was accepted")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "previous_response_id", f"param {e.body}")
    print(f"conversation: turn 2 has {second.usage.input_tokens} input tokens, retrieve and delete work")


def refusals(client, model):
    cases = [
        ({"reasoning": {"effort": "high"}}, "reasoning"),
        ({"include": ["message.output_text.logprobs"]}, "include"),
        ({"truncation": "auto"}, "truncation"),
        ({"background": True}, "background"),
        ({"tools": [{"type": "web_search"}]}, "tools"),
        ({"temperature": 3}, "temperature"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input"),
        ({"extra_body": {"conversation": "conv_1"}}, "conversation"),
    ]
    for kwargs, param in cases:
        kwargs.setdefault("input", "hi")
        try:
            client.responses.create(model=model, max_output_tokens=5, **kwargs)
        except openai.BadRequestError as e:
            check(e.body.get("param") == param, f"{kwargs}: param {e.body}")
            continue
        raise AssertionError(f"{kwargs} was accepted")
    print(f"refusals: {len(cases)} x 400 naming the field")


def main():
    base_url, model = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=300)
    created = text_and_messages(client, model)
    streamed(client, model, created)
    function_calls(client, model)
    structured(client, model)
    conversation(client, model)
    refusals(client, model)
    print("all Responses API checks passed")


if __name__ == "__main__":
    main()
