"""Helpers the OpenAI SDK test scripts of tests/server/ share."""

import openai


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_refusals(client, model, messages, cases):
    """Each (create() kwargs, param, word): a 400 whose param is `param` and whose message has `word`."""
    for kwargs, param, word in cases:
        try:
            client.chat.completions.create(model=model, messages=messages, max_tokens=5, **kwargs)
        except openai.BadRequestError as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(body.get("param") == param, f"{kwargs}: param {body.get('param')}")
            check(word in body.get("message", ""), f"{kwargs}: message {body.get('message')!r}")
            continue
        raise AssertionError(f"{kwargs} was accepted")
    print(f"refusals: {len(cases)} x 400 naming the field")
