#!/usr/bin/env python3
"""Writes tests/fixtures/smollm2_llamacpp.json: llama.cpp's view of the real SmolLM2 file.

For each prompt: llama.cpp's token ids, its greedy continuation (32 tokens, EOS not special-cased),
and the top logits at every continuation position twice: as llama.cpp computed them while decoding
token by token, and teacher-forced in one batched pass. The two differ by llama.cpp's own numeric
noise, which tells the C++ test which top-1 choices are stable enough to demand agreement on.

Needs `pip install llama-cpp-python==0.3.36 jinja2`; only the JSON it writes is committed.
"""
import hashlib
import json
import pathlib
import sys

import jinja2
import llama_cpp
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = ROOT / "tests/fixtures/smollm2_llamacpp.json"
NUM_GENERATED = 32
TOP_K = 5

CHAT_PROMPTS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain photosynthesis in simple terms.",
    "Give me three tips for learning to code.",
    "How many legs does a spider have?",
]
RAW_PROMPTS = [
    "The quick brown fox",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village,",
    "1, 2, 3, 4, 5,",
    "Les élèves ont étudié",
]


def chat_text(template: str, question: str) -> str:
    env = jinja2.Environment()
    return env.from_string(template).render(
        messages=[{"role": "user", "content": question}], add_generation_prompt=True)


def top_logits(row: np.ndarray) -> list:
    ids = np.argsort(-row)[:TOP_K]
    return [[int(i), float(row[i])] for i in ids]


def run_prompt(llm: llama_cpp.Llama, text: str) -> dict:
    prompt_ids = llm.tokenize(text.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(prompt_ids)
    generated, incremental_tops = [], []
    for _ in range(NUM_GENERATED):
        row = llm.scores[llm.n_tokens - 1]
        nxt = int(np.argmax(row))
        generated.append(nxt)
        incremental_tops.append(top_logits(row))
        llm.eval([nxt])
    # Teacher forcing: one pass over prompt + continuation, logits at every position.
    llm.reset()
    llm.eval(prompt_ids + generated)
    first = len(prompt_ids) - 1
    tops = [top_logits(llm.scores[first + i]) for i in range(NUM_GENERATED)]
    return {"text": text, "prompt_ids": prompt_ids, "generated_ids": generated,
            "generated_text": llm.detokenize(generated).decode(errors="replace"), "top_logits": tops,
            "top_logits_incremental": incremental_tops}


def main() -> None:
    digest = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    llm = llama_cpp.Llama(model_path=str(MODEL), n_ctx=512, n_batch=512, logits_all=True,
                          n_threads=2, verbose=False)
    template = llm.metadata["tokenizer.chat_template"]
    texts = [chat_text(template, q) for q in CHAT_PROMPTS] + RAW_PROMPTS
    fixture = {
        "generator": f"llama-cpp-python {llama_cpp.__version__}, scripts/gen_llamacpp_fixture.py",
        "model_sha256": digest,
        "top_k": TOP_K,
        "prompts": [run_prompt(llm, t) for t in texts],
    }
    OUT.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    for p in fixture["prompts"]:
        print(repr(p["text"][-40:]), "->", repr(p["generated_text"]), file=sys.stderr)


if __name__ == "__main__":
    main()
