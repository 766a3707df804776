"""A multi-tenant shared-prefix workload for flashserve-bench --dataset (JSONL of {prompt, max_tokens}).

Usage: tenants.py OUT.jsonl [--tenants 8] [--requests 200] [--prefix-words 960] [--seed 1]

Each tenant has a long system prompt of its own (about 1.3 tokens per word for SmolLM2's vocabulary,
so 960 words are 1,000+ tokens); every request is one tenant's prompt followed by a short user turn,
tenants drawn uniformly, in a seeded order. The bench client sends them with Poisson arrivals
(--request-rate R --burstiness 1).
"""

import argparse
import json
import random

WORDS = ("account billing invoice refund shipping order warranty device battery screen network router "
         "password login profile subscription plan upgrade downgrade cancel renewal payment card bank "
         "transfer delivery address tracking parcel courier return exchange policy support ticket agent "
         "escalation priority customer premium standard basic region language holiday schedule").split()
QUESTIONS = ["How do I reset my password?", "Where is my parcel?", "Can I get a refund?",
             "How do I upgrade my plan?", "Why was my card declined?", "How do I cancel?",
             "What does the warranty cover?", "Can I change my delivery address?"]


def system_prompt(tenant, words, rng):
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return (f"You are the support assistant of tenant {tenant}. Follow these house rules exactly. "
            f"{body}\n\nAnswer the customer briefly.\n\nCustomer: ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--prefix-words", type=int, default=960)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    prompts = [system_prompt(t, a.prefix_words, rng) for t in range(a.tenants)]
    with open(a.out, "w") as f:
        for _ in range(a.requests):
            prompt = prompts[rng.randrange(a.tenants)] + rng.choice(QUESTIONS) + "\nAssistant:"
            f.write(json.dumps({"prompt": prompt, "max_tokens": a.max_tokens}) + "\n")


if __name__ == "__main__":
    main()
