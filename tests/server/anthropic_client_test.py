"""The official Anthropic Python client against a running flashserve's Messages API.

Usage: anthropic_client_test.py BASE_URL MODEL
       anthropic_client_test.py --key KEY BASE_URL MODEL   (a server run with --api-key KEY)
  e.g. anthropic_client_test.py http://127.0.0.1:8000/v1 SmolLM2-135M-Instruct.Q4_1
  (a trailing /v1 is dropped: the client adds it)

Judges the protocol, not the answers (the model is tiny): messages.create with a system prompt and
several turns; messages.stream, whose text_stream and get_final_message() equal create() at
temperature 0; stop_sequences (stop_reason stop_sequence and the sequence reported, streamed too);
tool_choice {type: tool} and {type: any} giving tool_use blocks whose input validates, streamed the
same, then a tool_result round trip; count_tokens against the answer's usage; refusals surfacing as
the SDK's typed errors. --key: the key sent as x-api-key and as the SDK sends it, a wrong key an
AuthenticationError. Prints a short transcript; exits non-zero on the first failure.
"""

import sys

import anthropic
import jsonschema
from anthropic import Anthropic

SYSTEM = "You are a helpful assistant. Answer in one short sentence."
TURNS = [
    {"role": "user", "content": "Hi! I have a question about geography."},
    {"role": "assistant", "content": "Sure, ask away."},
    {"role": "user", "content": "What is the capital of France?"},
]
MAX_TOKENS = 24
GREEDY = {"temperature": 0}  # not a keyword argument of this SDK version: sent as extra_body

WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 30},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
WEATHER_TURN = [{"role": "user", "content": "What is the weather in Paris?"}]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")


def create(client, model, **kwargs):
    args = {"model": model, "max_tokens": MAX_TOKENS, "system": SYSTEM, "messages": TURNS, "extra_body": GREEDY}
    args.update(kwargs)
    return client.messages.create(**args)


def multi_turn(client, model):
    m = create(client, model)
    check(m.type == "message" and m.role == "assistant", f"message shape {m.type} {m.role}")
    check(m.id.startswith("msg_"), f"id {m.id}")
    check(m.model == model, f"model {m.model}")
    check(m.content and m.content[0].type == "text" and text_of(m).strip(), f"content {m.content}")
    check(m.stop_reason in ("end_turn", "max_tokens"), f"stop_reason {m.stop_reason}")
    check(m.stop_sequence is None, f"stop_sequence {m.stop_sequence}")
    check(m.usage.input_tokens > 0 and 0 < m.usage.output_tokens <= MAX_TOKENS, f"usage {m.usage}")
    check(m.usage.cache_creation_input_tokens == 0, f"cache_creation_input_tokens {m.usage.cache_creation_input_tokens}")
    print(f"create: {text_of(m)!r} ({m.stop_reason}, {m.usage.output_tokens} tokens)")
    return m


def streamed(client, model, whole):
    with client.messages.stream(model=model, max_tokens=MAX_TOKENS, system=SYSTEM, messages=TURNS,
                                extra_body=GREEDY) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    check(text == text_of(whole), f"text_stream {text!r} != create {text_of(whole)!r}")
    check(text_of(final) == text, "get_final_message text differs from text_stream")
    check(final.stop_reason == whole.stop_reason, f"stop_reason {final.stop_reason} != {whole.stop_reason}")
    check(final.usage.output_tokens == whole.usage.output_tokens, "output_tokens differ")
    check(final.id.startswith("msg_"), f"id {final.id}")
    print(f"stream: same {len(text)} characters, {final.stop_reason}")


def stop_sequences(client, model, whole):
    full = text_of(whole)
    # Three characters from the middle on whose first occurrence is where they stand.
    cuts = [c for c in range(len(full) // 2, len(full) - 3) if full.find(full[c:c + 3]) == c]
    check(cuts, f"no stop sequence to cut {full!r} with")
    cut = cuts[0]
    stop = full[cut:cut + 3]
    m = create(client, model, stop_sequences=["NEVER-SAID", stop])
    check(m.stop_reason == "stop_sequence", f"stop_reason {m.stop_reason}")
    check(m.stop_sequence == stop, f"stop_sequence {m.stop_sequence!r} != {stop!r}")
    check(text_of(m) == full[:cut], f"text {text_of(m)!r} != {full[:cut]!r}")
    with client.messages.stream(model=model, max_tokens=MAX_TOKENS, system=SYSTEM, messages=TURNS,
                                stop_sequences=[stop], extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    check(final.stop_reason == "stop_sequence" and final.stop_sequence == stop, f"streamed {final.stop_reason}")
    print(f"stop_sequences: cut at {stop!r}")


def tool_use_block(m):
    check(m.stop_reason == "tool_use", f"stop_reason {m.stop_reason}")
    blocks = [b for b in m.content if b.type == "tool_use"]
    check(len(blocks) >= 1, f"no tool_use block in {m.content}")
    for b in blocks:
        check(b.id.startswith("toolu_"), f"id {b.id}")
        check(b.name == "get_weather", f"name {b.name}")
        check(isinstance(b.input, dict), f"input {b.input!r}")
        jsonschema.validate(b.input, WEATHER["input_schema"])
    return blocks[0]


def tools(client, model):
    forced = {"type": "tool", "name": "get_weather"}
    m = client.messages.create(model=model, max_tokens=80, messages=WEATHER_TURN, tools=[WEATHER],
                               tool_choice=forced, extra_body=GREEDY)
    block = tool_use_block(m)
    with client.messages.stream(model=model, max_tokens=80, messages=WEATHER_TURN, tools=[WEATHER],
                                tool_choice=forced, extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    check(tool_use_block(final).input == block.input, f"streamed input {final.content} != {block.input}")
    single = client.messages.create(model=model, max_tokens=80, messages=WEATHER_TURN, tools=[WEATHER],
                                    tool_choice={"type": "any", "disable_parallel_tool_use": True},
                                    extra_body={"temperature": 0.7})
    check(len([b for b in single.content if b.type == "tool_use"]) == 1, f"one call: {single.content}")
    tool_use_block(single)
    # The call and its result go back; the model answers (whatever it says).
    turns = WEATHER_TURN + [
        {"role": "assistant", "content": m.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "18 C and sunny"}]},
    ]
    after = client.messages.create(model=model, max_tokens=MAX_TOKENS, messages=turns, tools=[WEATHER],
                                   extra_body=GREEDY)
    check(after.stop_reason in ("end_turn", "max_tokens", "tool_use"), f"stop_reason {after.stop_reason}")
    check(after.content, "no content after the tool result")
    count = client.messages.count_tokens(model=model, messages=turns, tools=[WEATHER])
    check(count.input_tokens == after.usage.input_tokens + after.usage.cache_read_input_tokens,
          f"count_tokens {count.input_tokens} != usage {after.usage}")
    print(f"tools: {block.name}({block.input}), then {after.stop_reason}")


def count_tokens(client, model, whole):
    count = client.messages.count_tokens(model=model, system=SYSTEM, messages=TURNS)
    used = whole.usage.input_tokens + whole.usage.cache_read_input_tokens
    check(count.input_tokens == used, f"count_tokens {count.input_tokens} != usage {whole.usage}")
    # The same prompt again is served from the prefix cache, and reported so.
    again = create(client, model)
    check(again.usage.cache_read_input_tokens > 0, f"no cache read: {again.usage}")
    check(again.usage.input_tokens + again.usage.cache_read_input_tokens == used, f"usage {again.usage}")
    print(f"count_tokens: {count.input_tokens} ({again.usage.cache_read_input_tokens} read from the cache)")


def refusals(client, model):
    cases = [
        ({"extra_body": {"frobnicate": 1}}, "frobnicate"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
        ({"extra_body": {"temperature": 1.5}}, "temperature"),
    ]
    for kwargs, word in cases:
        try:
            create(client, model, **kwargs)
        except anthropic.BadRequestError as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(body.get("type") == "error", f"{kwargs}: body {body}")
            check(body.get("error", {}).get("type") == "invalid_request_error", f"{kwargs}: body {body}")
            check(word in body.get("error", {}).get("message", ""), f"{kwargs}: message {body}")
            continue
        raise AssertionError(f"{kwargs} was accepted")
    try:
        create(client, "claude-elsewhere")
        raise AssertionError("an unknown model was accepted")
    except anthropic.NotFoundError as e:
        check(e.body["error"]["type"] == "not_found_error", f"body {e.body}")
    print(f"refusals: {len(cases)} x BadRequestError naming the field, NotFoundError for another model")


def keys(base_url, model, key):
    for name, client in [
        ("x-api-key", Anthropic(base_url=base_url, api_key=None, default_headers={"x-api-key": key}, max_retries=0)),
        ("the SDK's own", Anthropic(base_url=base_url, api_key=key, max_retries=0)),
    ]:
        m = create(client, model, max_tokens=4)
        check(m.type == "message", f"{name}: {m}")
        check(client.messages.count_tokens(model=model, messages=TURNS).input_tokens > 0, f"{name}: count_tokens")
    try:
        create(Anthropic(base_url=base_url, api_key=None, default_headers={"x-api-key": "wrong"}, max_retries=0), model)
        raise AssertionError("a wrong key was accepted")
    except anthropic.AuthenticationError as e:
        check(e.status_code == 401 and e.body["error"]["type"] == "authentication_error", f"body {e.body}")
    print("keys: x-api-key and the SDK's header accepted, a wrong key refused")


def main():
    args = sys.argv[1:]
    key = None
    if args[:1] == ["--key"]:
        key, args = args[1], args[2:]
    if len(args) != 2:
        print(__doc__)
        return 2
    base_url, model = args[0].removesuffix("/").removesuffix("/v1"), args[1]
    if key:
        keys(base_url, model, key)
        return 0
    client = Anthropic(base_url=base_url, api_key="unused", max_retries=0, timeout=120)
    whole = multi_turn(client, model)
    streamed(client, model, whole)
    stop_sequences(client, model, whole)
    count_tokens(client, model, whole)
    tools(client, model)
    refusals(client, model)
    print("all Anthropic SDK checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
