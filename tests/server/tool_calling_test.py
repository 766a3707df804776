"""Tool calling through the official OpenAI Python client, against a running flashserve.

Usage: tool_calling_test.py BASE_URL MODEL

Judges validity, not answer quality (the model is tiny): forced calls (tool_choice "required" or a
named function) must come back as tool_calls whose arguments validate against the function's
parameters (jsonschema) over seeds and temperatures, streamed and not; the SDK's parse() and
stream() helpers must hand back pydantic arguments; a whole round trip (call, tool result,
answer) must work. Prints a short transcript; exits non-zero on the first failure.
"""

import json
import sys

import jsonschema
import openai
from openai import OpenAI
from pydantic import BaseModel, Field
from sdk_checks import check, expect_refusals

MESSAGES = [{"role": "user", "content": "What is the weather in Paris, and what is 2 + 3?"}]
TEMPERATURES = (0.0, 0.7, 1.0)
SEEDS = (1, 2, 3)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Adds two integers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": -1000, "maximum": 1000},
                           "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, ADD]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


class GetWeather(BaseModel):
    """The current weather in a city."""
    city: str = Field(max_length=30)
    unit: str = Field(pattern="^(celsius|fahrenheit)$")


def validate_calls(calls):
    check(calls, "no tool calls")
    ids = set()
    for call in calls:
        check(call.type == "function", f"call type {call.type}")
        check(call.id.startswith("call_") and call.id not in ids, f"call id {call.id}")
        ids.add(call.id)
        check(call.function.name in PARAMS, f"unknown function {call.function.name}")
        jsonschema.validate(json.loads(call.function.arguments), PARAMS[call.function.name])


def forced_calls(client, model):
    """tool_choice required: every seed and temperature gives valid calls."""
    valid = 0
    for t in TEMPERATURES:
        for seed in SEEDS:
            r = client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, tool_choice="required",
                                               temperature=t, seed=seed, max_tokens=200)
            c = r.choices[0]
            check(c.finish_reason in ("tool_calls", "length"), f"finish_reason {c.finish_reason}")
            if c.finish_reason == "length":
                continue
            check(c.message.content is None, f"content {c.message.content!r}")
            validate_calls(c.message.tool_calls)
            valid += 1
    check(valid >= len(TEMPERATURES) * len(SEEDS) - 2, f"only {valid} answers finished within max_tokens")
    print(f"required: {valid} answers of valid calls, e.g. {c.message.tool_calls[0].function}")


def named_call(client, model):
    for seed in SEEDS:
        r = client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, temperature=1.0, seed=seed,
                                           tool_choice={"type": "function", "function": {"name": "add"}},
                                           parallel_tool_calls=False, max_tokens=200)
        c = r.choices[0]
        check(c.finish_reason == "tool_calls", f"finish_reason {c.finish_reason}")
        check(len(c.message.tool_calls) == 1 and c.message.tool_calls[0].function.name == "add",
              f"calls {c.message.tool_calls}")
        validate_calls(c.message.tool_calls)
    print(f"named: add({c.message.tool_calls[0].function.arguments})")


def streamed_deltas(client, model):
    """Deltas as OpenAI sends them: id, type and name first, then pieces of the arguments; the
    assembled calls are the non-streamed answer's (same seed)."""
    kwargs = dict(model=model, messages=MESSAGES, tools=TOOLS, tool_choice="required", temperature=0.8, seed=5,
                  max_tokens=200)
    whole = client.chat.completions.create(**kwargs).choices[0]
    calls, reason, pieces = {}, None, 0
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            reason = c.finish_reason or reason
            for d in c.delta.tool_calls or []:
                if d.id:
                    check(d.index not in calls and d.type == "function" and d.function.name, f"first delta {d}")
                    calls[d.index] = {"name": d.function.name, "arguments": d.function.arguments or ""}
                else:
                    check(d.index in calls and not d.function.name, f"later delta {d}")
                    calls[d.index]["arguments"] += d.function.arguments or ""
                pieces += 1
    check(reason == whole.finish_reason == "tool_calls", f"finish_reason {reason} / {whole.finish_reason}")
    expected = [{"name": t.function.name, "arguments": t.function.arguments} for t in whole.message.tool_calls]
    check([calls[i] for i in sorted(calls)] == expected, f"streamed {calls} != whole {expected}")
    check(pieces > 2 * len(calls), f"arguments came in {pieces} deltas: not streamed")
    print(f"streamed: {len(calls)} call(s) in {pieces} deltas, same as the whole answer")


def sdk_helpers(client, model):
    """parse() and stream() with pydantic_function_tool: arguments handed back as pydantic objects."""
    tool = openai.pydantic_function_tool(GetWeather)
    choice = {"type": "function", "function": {"name": "GetWeather"}}
    r = client.chat.completions.parse(model=model, messages=MESSAGES, tools=[tool], tool_choice=choice, seed=2,
                                      max_tokens=200)
    parsed = r.choices[0].message.tool_calls[0].function.parsed_arguments
    check(isinstance(parsed, GetWeather), f"parsed_arguments is {type(parsed)}")
    with client.chat.completions.stream(model=model, messages=MESSAGES, tools=[tool], tool_choice=choice, seed=3,
                                        max_tokens=200) as stream:
        deltas = 0
        done = None
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                deltas += 1
            elif event.type == "tool_calls.function.arguments.done":
                done = event
        final = stream.get_final_completion().choices[0].message
    check(done is not None and isinstance(done.parsed_arguments, GetWeather), f"stream() gave {done}")
    whole = client.chat.completions.parse(model=model, messages=MESSAGES, tools=[tool], tool_choice=choice, seed=3,
                                          max_tokens=200).choices[0].message
    check(final.content == whole.content, f"stream()'s content {final.content!r}, create()'s {whole.content!r}")
    print(f"parse(): {parsed!r}; stream(): {deltas} argument deltas, then {done.parsed_arguments!r}, "
          f"content {final.content!r} as create()'s")


def round_trip(client, model):
    """Call, run the function here, send the result back, get an answer."""
    messages = list(MESSAGES)
    r = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=200, seed=4,
                                       tool_choice={"type": "function", "function": {"name": "add"}})
    call = r.choices[0].message.tool_calls[0]
    args = json.loads(call.function.arguments)
    messages.append(r.choices[0].message)  # as the SDK's docs do: the message object itself
    messages.append({"role": "tool", "tool_call_id": call.id, "content": str(args["a"] + args["b"])})
    final = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=40, temperature=0)
    c = final.choices[0]
    check(c.finish_reason in ("stop", "length", "tool_calls"), f"finish_reason {c.finish_reason}")
    check(final.usage.prompt_tokens > r.usage.prompt_tokens, "the call and its result did not reach the prompt")
    if c.message.tool_calls:
        validate_calls(c.message.tool_calls)
    else:
        check(isinstance(c.message.content, str), f"content {c.message.content!r}")
    print(f"round trip: add({args}) -> {messages[-1]['content']}; answer {(c.message.content or '')[:50]!r}")


def auto_and_none(client, model):
    for choice in ("auto", "none"):
        r = client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, tool_choice=choice,
                                           max_tokens=60, temperature=0.7, seed=1)
        m = r.choices[0].message
        if m.tool_calls:
            check(choice == "auto", "tool_choice none made a call")
            validate_calls(m.tool_calls)
        else:
            check(isinstance(m.content, str), f"{choice}: content {m.content!r}")
    print("auto and none: well-formed answers")


def refusals(client, model):
    cases = [
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "nope"),
        ({"tool_choice": "required"}, "tool_choice", "tools"),
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools", "name"),
        ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "response_format", "tools"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
          "tool_choice": "required"}, "tools", "not"),
        ({"functions": [WEATHER["function"]]}, "functions", "tools"),
    ]
    expect_refusals(client, model, MESSAGES, cases)


def main():
    base_url, model = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=300)
    forced_calls(client, model)
    named_call(client, model)
    streamed_deltas(client, model)
    sdk_helpers(client, model)
    round_trip(client, model)
    auto_and_none(client, model)
    refusals(client, model)
    print("all tool calling checks passed")


if __name__ == "__main__":
    main()
