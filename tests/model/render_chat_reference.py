#!/usr/bin/env python3
"""Renders a fixed set of conversations through chat templates with jinja2, the way Hugging Face
transformers renders chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loop controls, raise_exception, strftime_now, json.dumps as tojson), and prints every case with
its inputs and the expected text (or the error it raised) as JSON. tests/model/test_chat_template.cpp
renders the same inputs with our engine and compares byte for byte.

    render_chat_reference.py TEMPLATE.jinja...
    render_chat_reference.py --snippets REQUEST.json

Each template's special tokens come from TOKENS below, by file name (the part before ".jinja").
With --snippets, REQUEST.json is {"context": {...}, "sources": [template, ...]} and the answer is
one {"output": text} or {"error": message} per source (tests/model/test_jinja.cpp uses it).
"""
import json
import sys
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

# bos_token / eos_token as each model's tokenizer has them.
TOKENS = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "llama-3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "qwen2.5": ("", "<|im_end|>"),
    "qwen3": ("", "<|im_end|>"),
    "mistral-nemo": ("<s>", "</s>"),
    "gemma-2": ("<bos>", "<eos>"),
    "gemma-3": ("<bos>", "<eos>"),
}
DEFAULT_TOKENS = ("<s>", "</s>")

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather in a city — in °C",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
        }, "required": ["city"]},
    }},
    {"type": "function", "function": {
        "name": "search",
        "description": "Searches the web",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number", "default": 2.5}},
                       "required": ["query"]},
    }},
]

CALL = {"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
CALL2 = {"id": "call67890", "type": "function", "function": {"name": "search", "arguments": {"query": "Eiffel tower"}}}

SYSTEM = {"role": "system", "content": "You are a terse assistant."}
USER = {"role": "user", "content": "What's the weather in Paris?"}


def cases():
    """(name, messages, add_generation_prompt, tools, extra)"""
    multi = [SYSTEM, {"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello. How can I help?"},
             {"role": "user", "content": "Tell me a joke."}]
    yield "system_multi_turn", multi, True, None, {}
    yield "system_multi_turn_no_prompt", multi, False, None, {}
    yield "no_system", [{"role": "user", "content": "Hello!"}], True, None, {}
    yield "ends_with_assistant", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}], False, None, {}
    yield "whitespace_and_unicode", [{"role": "system", "content": "  Be nice.\n"},
                                     {"role": "user", "content": " héllo 😀 \"quoted\" 'single'\n\n"},
                                     {"role": "assistant", "content": "\tBonjour ! "},
                                     {"role": "user", "content": "Line 1\r\nLine 2 {{ not a tag }} {% nor this %}"}], True, None, {}
    yield "roles_not_alternating", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], True, None, {}
    yield "empty", [], True, None, {}
    yield "developer_role", [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hi"}], True, None, {}
    tool_turns = [USER, {"role": "assistant", "content": "", "tool_calls": [CALL]},
                  {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp_c\": 21.5, \"sky\": \"clear\"}"}]
    yield "tools_with_system", [SYSTEM] + tool_turns, True, TOOLS, {}
    yield "tools_no_system", tool_turns, True, TOOLS, {}
    yield "tools_offered_only", [USER], True, TOOLS, {}
    yield "tool_calls_without_tools", [SYSTEM] + tool_turns + [{"role": "assistant", "content": "It is 21.5 °C and clear."}], False, None, {}
    yield "two_tool_calls", [USER, {"role": "assistant", "content": None, "tool_calls": [CALL, CALL2]},
                             {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "sunny"},
                             {"role": "tool", "tool_call_id": "call67890", "name": "search", "content": "324 m tall"}], True, TOOLS, {}
    thinking = [USER, {"role": "assistant", "content": "<think>\nThe user wants weather.\n</think>\n\nIt is sunny."},
                {"role": "user", "content": "Thanks!"}]
    yield "reasoning_history", thinking, True, None, {}
    yield "thinking_disabled", [USER], True, None, {"enable_thinking": False}
    yield "thinking_enabled", thinking, True, None, {"enable_thinking": True}
    yield "reasoning_content_field", [USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Look it up."}], False, None, {}
    yield "date_string", [SYSTEM, USER], True, TOOLS, {"date_string": "01 Jan 2025"}


class Generation(Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers tracks assistant
    spans with it; the text is unchanged)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main(paths):
    env = environment()
    out = []
    for path in paths:
        name = Path(path).name.removesuffix(".jinja")
        bos, eos = TOKENS.get(name, DEFAULT_TOKENS)
        source = Path(path).read_bytes().decode("utf-8")
        for case, messages, add_generation_prompt, tools, extra in cases():
            entry = {"template": name, "path": str(path), "case": case, "bos_token": bos, "eos_token": eos,
                     "messages": messages, "add_generation_prompt": add_generation_prompt, "tools": tools, "extra": extra}
            try:
                template = env.from_string(source)
                entry["output"] = template.render(messages=messages, tools=tools, documents=None,
                                                  add_generation_prompt=add_generation_prompt,
                                                  bos_token=bos, eos_token=eos, **extra)
            except Exception as e:  # every failure counts: the engine must fail too
                entry["error"] = f"{type(e).__name__}: {e}"
            out.append(entry)
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


def snippets(request_path):
    request = json.loads(Path(request_path).read_bytes().decode("utf-8"))
    env = environment()
    out = []
    for source in request["sources"]:
        try:
            out.append({"output": env.from_string(source).render(**request["context"])})
        except Exception as e:
            out.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--snippets"]:
        snippets(sys.argv[2])
    else:
        main(sys.argv[1:])
