"""Structured output through the official OpenAI Python client, against a running flashserve.

Usage: structured_output_test.py BASE_URL MODEL

Judges validity, not answer quality (the model is tiny): every finished output must parse and
validate against its schema (jsonschema) over several seeds and temperatures, streamed and not;
client.chat.completions.parse() must hand back the pydantic object; json_object, regex and GBNF
outputs must be what they promise; schemas and grammars that cannot be compiled must be refused
with a 400 naming the field. Prints a short transcript; exits non-zero on the first failure.
"""

import json
import re
import sys
from typing import Annotated, Literal, Optional

import jsonschema
import openai
from openai import OpenAI
from pydantic import BaseModel, Field
from sdk_checks import check, expect_refusals

MESSAGES = [{"role": "user", "content": "Invent a person and describe them."}]
TEMPERATURES = (0.0, 0.7, 1.0, 1.3)
SEEDS = (1, 2, 3)


class Address(BaseModel):
    city: str = Field(max_length=40)
    zip: str = Field(pattern=r"^[0-9]{5}$")


class Person(BaseModel):
    name: str = Field(max_length=40)
    age: int = Field(ge=0, le=120)
    role: Literal["admin", "user", "guest"]
    tags: list[Annotated[str, Field(max_length=20)]] = Field(max_length=3)
    address: Address
    nickname: Optional[Annotated[str, Field(max_length=20)]]


# Nested objects and arrays, enums, const, integer ranges, optional properties, anyOf, $ref.
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 99999},
        "status": {"enum": ["new", "paid", "shipped"]},
        "kind": {"const": "order"},
        "items": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {"$ref": "#/$defs/item"},
        },
        "note": {"anyOf": [{"type": "string", "maxLength": 30}, {"type": "null"}]},
        "priority": {"type": "boolean"},
    },
    "required": ["id", "status", "kind", "items"],
    "additionalProperties": False,
    "$defs": {
        "item": {
            "type": "object",
            "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2,4}$"},
                           "qty": {"type": "integer", "minimum": 1, "maximum": 10}},
            "required": ["sku", "qty"],
            "additionalProperties": False,
        }
    },
}


def schema_format(name, schema, strict=True):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}


def finished(choice):
    check(choice.finish_reason in ("stop", "length"), f"finish_reason {choice.finish_reason}")
    return choice.finish_reason == "stop"


def schema_outputs(client, model):
    """Every seed and temperature: the output parses and validates."""
    valid = 0
    for t in TEMPERATURES:
        for seed in SEEDS:
            r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=t, seed=seed, max_tokens=300,
                                               response_format=schema_format("order", ORDER_SCHEMA))
            c = r.choices[0]
            if not finished(c):
                continue
            jsonschema.validate(json.loads(c.message.content), ORDER_SCHEMA)
            valid += 1
    check(valid >= len(TEMPERATURES) * len(SEEDS) - 2, f"only {valid} outputs finished within max_tokens")
    print(f"json_schema: {valid} outputs validated")


def schema_stream(client, model):
    stream = client.chat.completions.create(model=model, messages=MESSAGES, temperature=0.8, seed=7, max_tokens=300,
                                            stream=True, response_format=schema_format("order", ORDER_SCHEMA))
    text, reason = "", None
    for chunk in stream:
        for c in chunk.choices:
            text += c.delta.content or ""
            reason = c.finish_reason or reason
    check(reason == "stop", f"stream finish_reason {reason}")
    jsonschema.validate(json.loads(text), ORDER_SCHEMA)
    print(f"json_schema streamed: {text[:60]}...")


def pydantic_parse(client, model):
    parsed = 0
    for t in TEMPERATURES:
        try:
            r = client.chat.completions.parse(model=model, messages=MESSAGES, temperature=t, seed=11, max_tokens=400,
                                              response_format=Person)
        except openai.LengthFinishReasonError:  # a tiny model may ramble inside a string
            continue
        m = r.choices[0].message
        check(isinstance(m.parsed, Person), f"parsed is {type(m.parsed)}")
        check(0 <= m.parsed.age <= 120 and len(m.parsed.tags) <= 3 and re.fullmatch(r"[0-9]{5}", m.parsed.address.zip),
              f"constraints broken: {m.parsed}")
        parsed += 1
    check(parsed >= len(TEMPERATURES) // 2, f"only {parsed} parsed")
    print(f"parse(): {parsed} pydantic objects, e.g. {m.parsed}")


def json_object(client, model):
    r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=0, max_tokens=400,
                                       response_format={"type": "json_object"})
    c = r.choices[0]
    if finished(c):
        check(isinstance(json.loads(c.message.content), dict), "json_object output is not an object")
    else:
        check(c.message.content.lstrip().startswith("{"), "json_object output does not start an object")
    print(f"json_object: {c.message.content[:60]}...")


def regex_and_grammar(client, model):
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "A US phone number?"}],
                                       max_tokens=30, extra_body={"regex": r"\(\d{3}\) \d{3}-\d{4}"})
    check(re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", r.choices[0].message.content), f"regex: {r.choices[0].message.content}")
    gbnf = 'root ::= ("yes" | "no") ", because " [a-z ]{1,40} "."'
    r = client.completions.create(model=model, prompt="Is the sky blue? Answer:", max_tokens=60, temperature=0.9, seed=3,
                                  extra_body={"grammar": gbnf})
    c = r.choices[0]
    if finished(c):
        check(re.fullmatch(r"(yes|no), because [a-z ]{1,40}\.", c.text), f"grammar: {c.text!r}")
    r = client.completions.create(model=model, prompt="Order:", max_tokens=300, temperature=0.5, seed=4,
                                  extra_body={"response_format": schema_format("order", ORDER_SCHEMA)})
    if finished(r.choices[0]):
        jsonschema.validate(json.loads(r.choices[0].text), ORDER_SCHEMA)
    print("regex, grammar, and json_schema on /v1/completions: ok")


def refusals(client, model):
    cases = [
        ({"response_format": schema_format("bad", {"type": "object", "not": {}})}, "response_format", "not"),
        ({"response_format": schema_format("bad", {"$ref": "#/$defs/missing"})}, "response_format", "missing"),
        ({"response_format": {"type": "xml"}}, "response_format", "xml"),
        ({"extra_body": {"grammar": "root ::= undefined-rule"}}, "grammar", "undefined-rule"),
        ({"extra_body": {"regex": "(?=lookahead)"}}, "regex", "look"),
        ({"extra_body": {"regex": "a", "grammar": 'root ::= "a"'}}, "grammar", "both"),
    ]
    expect_refusals(client, model, MESSAGES, cases)


def main():
    base_url, model = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=300)
    schema_outputs(client, model)
    schema_stream(client, model)
    pydantic_parse(client, model)
    json_object(client, model)
    regex_and_grammar(client, model)
    refusals(client, model)
    print("all structured output checks passed")


if __name__ == "__main__":
    main()
