#!/usr/bin/env python3
"""Writes tests/fixtures/smollm2_tokens.json: token ids that llama.cpp (through llama-cpp-python, an
independent implementation) gives for tricky strings, which tests/model/test_tokenizer.cpp must
reproduce exactly.

  * "cases": the real SmolLM2 vocabulary (byte-level BPE, pre-tokenizer "smollm"): hand-picked
    strings, then seeded random ones.
  * "pre_variants": the same vocabulary relabelled with other tokenizer.ggml.pre names, to check the
    other regex cascades.
  * "spm": a small SentencePiece-style ("llama") vocabulary with byte fallback, and its cases.

Texts with user-defined tokens are only recorded with special=True: without it llama.cpp still
matches user-defined tokens (as Hugging Face does for non-special added tokens), while flashserve's
contract tokenizes every special token's text as plain text unless parse_special is set.

Usage: python3 scripts/gen_tokenizer_fixture.py [model.gguf] [out.json]
Needs: pip install llama-cpp-python gguf
"""
import json
import os
import random
import sys
import tempfile

import gguf
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_OUT = os.path.join(ROOT, "tests/fixtures/smollm2_tokens.json")

TEXTS = [
    "", " ", "  ", "   leading", "trailing   ", "\t", "tabs\tand\t\ttabs", "\n",
    "line1\nline2\n\nline4\n\n\n", " \n \n", "a\r\nb\r\n", "Hello world", "Hello, world! How are you?",
    "I'm don't you'll we've they're she'd it's", "I'M DON'T WE'VE", "'s 'S 'll 'LL", "1234567",
    "3.14159", " 42 007", "The year 2024 had 365 days, 24h each.", "$100 €200 £300 ¥400",
    "\u00bd \u2155 \u0663\u0664 \u2460", "!!!???...,,,;;;", "--- *** ### @@@ ~~~", "<<>> [[]] {{}}",
    "def foo(x):\n    return x ** 2  # square\n", 'int main() { printf("%d\\n", 42); }',
    "    indented\n\tmixed \t \n", "https://example.com/path?query=1&b=2#frag", "someone@example.org",
    "café naïve résumé", "Straße Ærøskøbing", "e\u0301 a\u0300 n\u0303 \u0301", "你好，世界！这是一个测试。",
    "こんにちは、世界。カタカナ", "안녕하세요 세계", "Привет, мир!", "Γειά σου Κόσμε", "مرحبا بالعالم",
    "नमस्ते दुनिया", "I \u2764\ufe0f \U0001F355 and \U0001F680!",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family", "\U0001F1FA\U0001F1F8\U0001F1EB\U0001F1F7",
    "\U0001F44B\U0001F3FD", "Hello世界123abc\U0001F600", "a\u00a0b\u3000c\u2003d", "a\u0085b", "x\u200by",
    "a" * 64, "<|im_start", "<|im_end|> inside plain text",
]
SPECIAL_TEXTS = [
    "<|im_start|>user\nhi<|im_end|>", "<|im_start|><|im_end|><|endoftext|>", "text<|im_end|>more",
    "<|im_start|>assistant\n  Sure! 42<|im_end|>\n",
]
# Fragments for seeded random strings, which find the combinations nobody thinks to write down.
RANDOM_FRAGMENTS = [
    " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\u0085", "'", "'s", "'ll", "'T", "'re", "a", "Z",
    "hello", "World", "\u00df", "\u00e9", "e\u0301", "\u0301", "\u03a9", "\u0436", "\u4e2d", "\u6587\u5b57", "\u30ab",
    "\ud55c", "0", "12", "345", "\u0663", "\u00bd", "\u00b2", "!", "?", ".", ",", "...", "--", "#", "$", "\u20ac", "@", "(",
    ")", "{", "}", "<", ">", "|", "_", "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F1EB\U0001F1F7", "\u2764\ufe0f",
    "\u200b", "\u200d", "\ufeff", "\x00", "\x7f", "\U0010FFFD", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im",
    "|>", "<repo_name>",
]
RANDOM_COUNT = 120
# Only hand-picked texts here: llama.cpp runs the deepseek-llm patterns with non-ASCII whitespace
# replaced by "\v", so it departs from the patterns (and from flashserve) where a character class
# lists such whitespace, e.g. U+3000 next to punctuation or U+2003 next to CJK.
PRE_VARIANTS = ["gpt-2", "starcoder", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon"]

# SentencePiece vocabulary: <unk>, <s>, </s>, 256 byte tokens, then pieces with scores. The scores
# make some longer pieces lose to shorter ones so that merge order matters.
SPM_PIECES = [
    ("\u2581", -1.0), ("\u2581h", -3.0), ("\u2581he", -4.0), ("\u2581hell", -6.0), ("\u2581hello", -5.0),
    ("h", -2.0), ("e", -2.0), ("l", -2.0), ("o", -2.0), ("ll", -3.0), ("he", -3.5), ("hell", -4.5),
    ("lo", -3.2), ("llo", -2.5), ("\u2581w", -3.0), ("\u2581wor", -5.0), ("\u2581world", -5.5), ("w", -2.0),
    ("r", -2.0), ("d", -2.0), ("or", -3.0), ("ld", -3.0), ("orld", -4.0), ("\u2581\u2581", -3.0),
    ("\u2581\u2581\u2581\u2581", -3.5), ("a", -2.0), ("b", -2.0), ("ab", -2.1), ("ba", -2.1), ("\u2581a", -3.0),
    ("\u2581b", -3.0), ("1", -2.0), ("2", -2.0), ("12", -2.5), ("\u4e16", -6.0),
]
SPM_SPECIALS = [("<tool>", 4), ("<|end|>", 3)]
SPM_TEXTS = [
    "", "hello", "hello world", " hello", "hello  world", "    hello", "abab bab", "aab bba", "12 21 121",
    "hello\nworld", "caf\u00e9", "\u4e16\u754c", "\U0001F600!", "hello <|end|> world",
]
SPM_SPECIAL_TEXTS = ["hello<tool>world", "<|end|>hello", "<tool> <|end|>"]


def tokenize(llm, text, special):
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)


def load(path):
    return Llama(model_path=path, vocab_only=True, verbose=False)


def copy_fields(reader, writer, skip):
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or skip(name):
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type)


def write_vocab_only(path, reader, skip, extra):
    """A tensor-free copy of the model's metadata, with `extra(writer)` adding the tokenizer keys."""
    writer = gguf.GGUFWriter(path, arch=reader.fields["general.architecture"].contents())
    copy_fields(reader, writer, skip)
    extra(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def pre_variant_cases(reader, tmpdir, pre):
    path = os.path.join(tmpdir, f"pre-{pre}.gguf")
    write_vocab_only(path, reader, lambda k: k == "tokenizer.ggml.pre",
                     lambda w: w.add_string("tokenizer.ggml.pre", pre))
    llm = load(path)
    return [{"text": t, "ids": tokenize(llm, t, False)} for t in TEXTS]


def spm_vocab():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    for text, kind, score in [(t, 1, sc) for t, sc in SPM_PIECES] + [(t, k, 0.0) for t, k in SPM_SPECIALS]:
        tokens.append(text)
        types.append(kind)
        scores.append(score)
    return {"tokens": tokens, "token_types": types, "scores": scores, "bos_id": 1, "eos_id": 2, "unk_id": 0}


def spm_cases(reader, tmpdir):
    vocab = spm_vocab()

    def add_tokenizer(w):
        w.add_string("tokenizer.ggml.model", "llama")
        w.add_array("tokenizer.ggml.tokens", vocab["tokens"])
        w.add_array("tokenizer.ggml.scores", vocab["scores"])
        w.add_array("tokenizer.ggml.token_type", vocab["token_types"])
        w.add_uint32("tokenizer.ggml.bos_token_id", vocab["bos_id"])
        w.add_uint32("tokenizer.ggml.eos_token_id", vocab["eos_id"])
        w.add_uint32("tokenizer.ggml.unknown_token_id", vocab["unk_id"])
        w.add_bool("tokenizer.ggml.add_bos_token", True)
        w.add_bool("tokenizer.ggml.add_space_prefix", True)

    path = os.path.join(tmpdir, "spm.gguf")
    write_vocab_only(path, reader, lambda k: k.startswith("tokenizer.") or k == "llama.vocab_size", add_tokenizer)
    llm = load(path)
    cases = []
    runs = [(t, s) for t in SPM_TEXTS for s in (False, True)] + [(t, True) for t in SPM_SPECIAL_TEXTS]
    for text, special in runs:
        cases.append({"text": text, "parse_special": special,
                      "ids": llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)})
    return {"vocab": vocab, "cases": cases}


def to_json_lines(value, indent=""):
    """JSON with one case per line: readable diffs without one line per token id."""
    inner = indent + " "
    nested = lambda v: isinstance(v, dict) or (isinstance(v, list) and v and isinstance(v[0], dict))
    if isinstance(value, dict) and any(nested(v) for v in value.values()):
        items = [f"{inner}{json.dumps(k)}: {to_json_lines(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return "[\n" + ",\n".join(inner + to_json_lines(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def random_cases(llm):
    rng = random.Random(20240601)
    cases = []
    for _ in range(RANDOM_COUNT):
        text = "".join(rng.choice(RANDOM_FRAGMENTS) for _ in range(rng.randint(1, 12)))
        special = rng.random() < 0.3
        cases.append({"text": text, "parse_special": special, "ids": tokenize(llm, text, special)})
    return cases


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    out = sys.argv[2] if len(sys.argv) > 2 else DEFAULT_OUT
    llm = load(model)
    cases = [{"text": t, "parse_special": False, "ids": tokenize(llm, t, False)} for t in TEXTS]
    cases += [{"text": t, "parse_special": s, "ids": tokenize(llm, t, s)} for t in SPECIAL_TEXTS for s in (True, False)]
    cases += random_cases(llm)
    reader = gguf.GGUFReader(model)
    with tempfile.TemporaryDirectory() as tmpdir:
        variants = {pre: pre_variant_cases(reader, tmpdir, pre) for pre in PRE_VARIANTS}
        spm = spm_cases(reader, tmpdir)
    fixture = {
        "generator": f"scripts/gen_tokenizer_fixture.py with llama-cpp-python {llama_cpp.__version__}",
        "model": os.path.basename(model),
        "cases": cases,
        "pre_variants": variants,
        "spm": spm,
    }
    with open(out, "w") as f:
        f.write(to_json_lines(fixture) + "\n")
    print(f"wrote {out}: {len(cases)} cases, {len(variants)} pre variants, {len(spm['cases'])} spm cases")


if __name__ == "__main__":
    main()
