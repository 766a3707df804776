"""The official OpenAI Python client against a running flashserve.

Usage: openai_client_test.py BASE_URL MODEL [API_KEY]
       openai_client_test.py --overload BASE_URL MODEL
  e.g. openai_client_test.py http://127.0.0.1:8000/v1 SmolLM2-135M-Instruct.Q4_1

Completions and chat, streamed and not, with stream_options.include_usage; checks the shapes the
client parses and that the model said something; then the conformance points: OpenAI's default
max_tokens, unsupported fields refused by name, the developer role, cached prompt tokens,
system_fingerprint, models.retrieve. --overload (a server run with --max-num-seqs 1
--max-waiting 1 --max-queue-time 0.5) checks 429 with Retry-After, streamed and not. Prints a short
transcript; exits non-zero on the first failure.
"""

import sys

import openai
from openai import OpenAI

PROMPT = "The capital of France is"
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]
MAX_TOKENS = 16


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def check_usage(usage, max_tokens=MAX_TOKENS):
    check(usage is not None, "usage is missing")
    check(usage.prompt_tokens > 0, f"prompt_tokens {usage.prompt_tokens}")
    check(0 < usage.completion_tokens <= max_tokens, f"completion_tokens {usage.completion_tokens}")
    check(usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, "total_tokens is not the sum")


def completion(client, model):
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=MAX_TOKENS, temperature=0)
    check(r.object == "text_completion", f"object {r.object}")
    check(r.id.startswith("cmpl-"), f"id {r.id}")
    check(r.model == model, f"model {r.model}")
    check(len(r.choices) == 1 and r.choices[0].index == 0, "one choice at index 0")
    check(r.choices[0].text.strip() != "", "empty text")
    check(r.choices[0].finish_reason in ("stop", "length"), f"finish_reason {r.choices[0].finish_reason}")
    check_usage(r.usage)
    return r.choices[0].text


def completion_stream(client, model, expected):
    stream = client.completions.create(model=model, prompt=PROMPT, max_tokens=MAX_TOKENS, temperature=0,
                                       stream=True, stream_options={"include_usage": True})
    text, reasons, usage = "", [], None
    for chunk in stream:
        check(chunk.object == "text_completion", f"chunk object {chunk.object}")
        if not chunk.choices:
            usage = chunk.usage
            continue
        text += chunk.choices[0].text
        if chunk.choices[0].finish_reason:
            reasons.append(chunk.choices[0].finish_reason)
    check(text == expected, f"streamed text {text!r} != {expected!r}")
    check(len(reasons) == 1, f"finish reasons {reasons}")
    check_usage(usage)
    return text


def chat(client, model):
    r = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=MAX_TOKENS, temperature=0)
    check(r.object == "chat.completion", f"object {r.object}")
    check(r.id.startswith("chatcmpl-"), f"id {r.id}")
    check(len(r.choices) == 1, "one choice")
    msg = r.choices[0].message
    check(msg.role == "assistant", f"role {msg.role}")
    check(msg.content and msg.content.strip() != "", "empty content")
    check(r.choices[0].finish_reason in ("stop", "length"), f"finish_reason {r.choices[0].finish_reason}")
    check_usage(r.usage)
    return msg.content


def chat_stream(client, model, expected):
    stream = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=MAX_TOKENS, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    check(len(chunks) >= 3, f"only {len(chunks)} chunks")
    check(all(c.object == "chat.completion.chunk" for c in chunks), "chunk objects")
    check(chunks[0].choices[0].delta.role == "assistant", "the first delta carries the role")
    usage_chunk = chunks[-1]
    check(usage_chunk.choices == [], "the usage chunk has no choices")
    check_usage(usage_chunk.usage)
    finish = chunks[-2].choices[0]
    check(finish.finish_reason in ("stop", "length"), f"finish_reason {finish.finish_reason}")
    text = "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
    check(text == expected, f"streamed content {text!r} != {expected!r}")
    return text


def models_and_errors(client, model):
    listed = [m.id for m in client.models.list()]
    check(listed == [model], f"models {listed}")
    try:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES, max_tokens=2)
        raise AssertionError("an unknown model was accepted")
    except openai.NotFoundError as e:
        check(e.code == "model_not_found", f"code {e.code}")
    try:
        client.completions.create(model=model, prompt=PROMPT, max_tokens=2, temperature=-1)
        raise AssertionError("temperature -1 was accepted")
    except openai.BadRequestError:
        pass
    return f"models {listed}; unknown model -> 404, bad temperature -> 400"


def default_max_tokens(client, model):
    r = client.completions.create(model=model, prompt=PROMPT, temperature=0, extra_body={"ignore_eos": True})
    check(r.usage.completion_tokens == 16, f"completions default max_tokens gave {r.usage.completion_tokens}")
    return "completions without max_tokens: 16 tokens"


def refused(what, param, call):
    try:
        call()
    except openai.BadRequestError as e:
        check(e.param == param, f"{what}: param {e.param!r}, expected {param!r}")
        check(param in str(e.message), f"{what}: message {e.message!r} does not name {param!r}")
        return
    raise AssertionError(f"{what} was accepted")


def unsupported_fields(client, model):
    chat_call = lambda **kw: client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=2, **kw)
    refused("response_format xml", "response_format", lambda: chat_call(response_format={"type": "xml"}))
    refused("a tool that is not a function", "tools", lambda: chat_call(tools=[{"type": "code_interpreter"}]))
    refused("tool_choice without tools", "tool_choice", lambda: chat_call(tool_choice="required"))
    refused("an unknown field", "frobnicate", lambda: chat_call(extra_body={"frobnicate": 1}))
    comp_call = lambda **kw: client.completions.create(model=model, prompt=PROMPT, max_tokens=2, **kw)
    refused("suffix", "suffix", lambda: comp_call(suffix="the end"))
    refused("best_of", "best_of", lambda: comp_call(best_of=3))
    chat_call(response_format={"type": "text"}, tool_choice="none", store=False)  # ask for nothing: accepted
    return "malformed response_format, tools, tool_choice; suffix, best_of, unknown fields -> 400 naming the field"


def developer_role_and_details(client, model):
    messages = [{"role": "developer", "content": "Answer in one word."}] + MESSAGES[1:]
    first = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0)
    check(first.system_fingerprint and first.system_fingerprint.startswith("fp_"), f"fingerprint {first.system_fingerprint}")
    details = first.usage.prompt_tokens_details
    check(details is not None and details.cached_tokens is not None, "usage.prompt_tokens_details.cached_tokens missing")
    again = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0)
    cached = again.usage.prompt_tokens_details.cached_tokens
    check(cached > 0, f"the repeated prompt found {cached} cached tokens")
    card = client.models.retrieve(model)
    check(card.id == model, f"retrieved {card.id}")
    try:
        client.models.retrieve("no-such-model")
        raise AssertionError("an unknown model was retrieved")
    except openai.NotFoundError:
        pass
    return f"developer role ok; fingerprint {first.system_fingerprint}; cached_tokens {cached}; models.retrieve ok"


def overload(client, model):
    """One long request runs; the next waits past --max-queue-time and is dropped: 429, streamed or not.
    The long one streams and holds the server's only slot until it is closed, however fast the
    machine decodes (300 tokens once ran out before the second refusal on a fast CPU)."""
    long_one = client.completions.create(model=model, prompt=PROMPT, max_tokens=4000, stream=True,
                                         extra_body={"ignore_eos": True})
    next(iter(long_one))
    try:
        for stream in (False, True):
            try:
                r = client.completions.create(model=model, prompt=PROMPT, max_tokens=2, stream=stream)
                if stream:
                    list(r)
                raise AssertionError(f"stream={stream}: not refused")
            except openai.RateLimitError as e:
                check(e.response.headers.get("retry-after") == "1", f"Retry-After {e.response.headers.get('retry-after')}")
    finally:
        long_one.close()
    return "dropped from the queue -> 429 with Retry-After, streamed and not"


def embeddings(client, model):
    """The SDK asks for base64 unless told otherwise; both encodings give the same unit vectors."""
    texts = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Stock markets fell sharply today."]
    packed = client.embeddings.create(model=model, input=texts)
    plain = client.embeddings.create(model=model, input=texts, encoding_format="float")
    check(packed.object == "list" and len(packed.data) == 3, "three embeddings")
    check(packed.usage.prompt_tokens > 0 and packed.usage.total_tokens == packed.usage.prompt_tokens, "usage")
    for a, b in zip(packed.data, plain.data):
        check(len(a.embedding) == len(b.embedding) == 576, f"dimensions {len(a.embedding)}")
        check(max(abs(x - y) for x, y in zip(a.embedding, b.embedding)) < 1e-6, "base64 and float differ")
        check(abs(sum(x * x for x in a.embedding) - 1) < 1e-4, "not unit length")
    dot = lambda u, v: sum(x * y for x, y in zip(u.embedding, v.embedding))
    similar, unrelated = dot(plain.data[0], plain.data[1]), dot(plain.data[0], plain.data[2])
    try:
        client.embeddings.create(model=model, input="x", dimensions=64)
        raise AssertionError("dimensions=64 was accepted")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "dimensions", f"param {e.body}")
    return f"3 x 576, cos(similar)={similar:.3f} cos(unrelated)={unrelated:.3f}"


def main():
    args = sys.argv[1:]
    overload_mode = args[:1] == ["--overload"]
    if overload_mode:
        args = args[1:]
    if len(args) not in (2, 3):
        print(__doc__)
        return 2
    base_url, model = args[0], args[1]
    api_key = args[2] if len(args) == 3 else "unused"
    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
    steps = [
        ("completion", lambda: completion(client, model)),
        ("completion stream", lambda: completion_stream(client, model, results["completion"])),
        ("chat", lambda: chat(client, model)),
        ("chat stream", lambda: chat_stream(client, model, results["chat"])),
        ("models and errors", lambda: models_and_errors(client, model)),
        ("default max_tokens", lambda: default_max_tokens(client, model)),
        ("unsupported fields", lambda: unsupported_fields(client, model)),
        ("developer role, usage details", lambda: developer_role_and_details(client, model)),
        ("embeddings", lambda: embeddings(client, model)),
    ]
    if overload_mode:
        steps = [("overload", lambda: overload(client, model))]
    results = {}
    for name, step in steps:
        try:
            results[name] = step()
        except Exception as e:  # report which step failed and why, then stop
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            return 1
        print(f"ok   {name}: {results[name]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
