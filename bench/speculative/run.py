#!/usr/bin/env python3
"""Speculative decoding, side by side in one run: flashserve with speculation off, ngram and suffix
(one server, chosen per request by its "speculative" field), and llama-server without and with its
n-gram speculation on the same GGUF. Greedy chat requests from prompts.json: input-grounded work
(edit a code file or a JSON document, quote a passage) and free chat, one at a time (output tok/s of
each request, end to end) and at concurrency 16 (throughput of the whole batch; flashserve only).
Arms alternate within every round, their order rotating from round to round; no prompt is served
from a cache (flashserve --no-prefix-caching, llama-server cache_prompt false), or the arm after the
first would skip its prefill. flashserve's arms must give identical text: any difference is
reported and fails the run.

  bench/speculative/run.py --model M.gguf --out DIR [--rounds 3] [--llama-server PATH]
"""
import argparse
import concurrent.futures
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def stream(port, body, timeout=600):
    """Streams a chat completion: (text, completion tokens, seconds to the first token, seconds in all)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    text, first, tokens = [], None, None
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for c in chunk.get("choices", []):
                piece = (c.get("delta") or {}).get("content") or ""
                if piece and first is None:
                    first = time.perf_counter() - t0
                text.append(piece)
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    total = time.perf_counter() - t0
    if tokens is None:
        sys.exit(f"server on port {port} sent no usage")
    return "".join(text), tokens, first if first is not None else total, total


def wait_ready(port, proc, path):
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"server on port {port} exited during startup")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    sys.exit(f"server on port {port} not ready after 120 s")


class Arm:
    def __init__(self, name, port, extra=None):
        self.name, self.port, self.extra = name, port, extra or {}

    def run(self, prompt, max_tokens):
        body = {"model": "bench", "messages": [{"role": "user", "content": prompt}], "temperature": 0,
                "max_tokens": max_tokens, "seed": 1}
        body.update(self.extra)
        text, tokens, first, total = stream(self.port, body)
        return {"text": text, "tokens": tokens, "seconds": total, "first": first}


def start_servers(args, out_dir):
    procs, arms = [], []
    fs_log = open(os.path.join(out_dir, "flashserve.log"), "w")
    procs.append(subprocess.Popen([args.flashserve, "--threads", str(args.threads), "serve", "--model", args.model,
                                   "--host", "127.0.0.1", "--port", "18901", "--grpc-port", "0",
                                   "--served-model-name", "bench", "--speculative", "ngram", "--no-prefix-caching",
                                   "--num-speculative-tokens", str(args.k)], stdout=fs_log, stderr=fs_log))
    wait_ready(18901, procs[-1], "/ready")
    arms += [Arm("flashserve off", 18901, {"speculative": "off"}), Arm("flashserve ngram", 18901),
             Arm("flashserve suffix", 18901, {"speculative": "suffix"})]
    if args.llama_server and os.path.exists(args.llama_server):
        for port, name, spec in ((18902, "llama-server", []),
                                 (18903, f"llama-server {args.llama_spec}", ["--spec-type", args.llama_spec])):
            log = open(os.path.join(out_dir, f"llama-server-{port}.log"), "w")
            procs.append(subprocess.Popen([args.llama_server, "-m", args.model, "-t", str(args.threads), "-c", "4096",
                                           "-np", "1", "--host", "127.0.0.1", "--port", str(port), "-a", "bench"] + spec,
                                          stdout=log, stderr=log))
            wait_ready(port, procs[-1], "/health")
            arms.append(Arm(name, port, {"cache_prompt": False}))
    return procs, arms


def single_stream(arms, prompts, rounds, max_tokens):
    """results[workload][arm][prompt] = list of runs."""
    results = {w: {a.name: {p["name"]: [] for p in ps} for a in arms} for w, ps in prompts.items()}
    for r in range(rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        for workload, ps in prompts.items():
            for p in ps:
                for a in order:
                    results[workload][a.name][p["name"]].append(a.run(p["prompt"], max_tokens))
    return results


def concurrent_batch(arm, prompts, concurrency, max_tokens):
    jobs = [prompts[i % len(prompts)]["prompt"] for i in range(2 * concurrency)]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        runs = list(pool.map(lambda p: arm.run(p, max_tokens), jobs))
    return sum(r["tokens"] for r in runs) / (time.perf_counter() - t0), [r["text"] for r in runs]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        text = r.read().decode()
    values = {}
    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        m = re.search(rf"^flashserve_spec_decode_{name}_total\{{[^}}]*\}} (\S+)$", text, re.M)
        values[name] = float(m.group(1)) if m else 0.0
    return values


def cpu_info():
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor()
    keep = [l for l in lscpu.splitlines() if l.split(":")[0].strip() in ("Model name", "CPU family", "Model", "CPU(s)", "Flags")]
    return "\n".join(keep)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--k", type=int, default=7, help="--num-speculative-tokens")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--flashserve", default=os.path.join(ROOT, "build", "server", "flashserve"))
    ap.add_argument("--llama-server", default=os.path.join(ROOT, ".cache", "llamacpp", "build", "bin", "llama-server"))
    ap.add_argument("--llama-spec", default="ngram-simple", help="llama-server --spec-type for its speculative arm")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    prompts = json.load(open(os.path.join(HERE, "prompts.json")))
    procs, arms = start_servers(args, args.out)
    try:
        for a in arms:  # warm-up: first requests pay for page faults and thread start
            a.run(prompts["chat"][0]["prompt"], 16)
        single = single_stream(arms, prompts, args.rounds, args.max_tokens)
        fs = arms[:3]
        batch = {w: {a.name: [] for a in fs} for w in prompts}
        batch_texts = {}
        for r in range(args.rounds):
            for workload, ps in prompts.items():
                for a in fs[r % 3:] + fs[:r % 3]:
                    tput, texts = concurrent_batch(a, ps, args.concurrency, args.max_tokens)
                    batch[workload][a.name].append(tput)
                    batch_texts.setdefault((workload, r), {})[a.name] = texts
        metrics = scrape(18901)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
    report(args, arms, prompts, single, batch, batch_texts, metrics)


def tok_per_s(runs):
    return sum(r["tokens"] for r in runs) / sum(r["seconds"] for r in runs)


def decode_tok_per_s(runs):
    """After the first token: what speculation speeds up (the prompt's prefill it cannot)."""
    return sum(r["tokens"] - 1 for r in runs) / sum(r["seconds"] - r["first"] for r in runs)


def report(args, arms, prompts, single, batch, batch_texts, metrics):
    lines = [f"# Speculative decoding, {time.strftime('%Y-%m-%d %H:%M')}", "", "```", cpu_info(), "```", "",
             f"model {os.path.basename(args.model)}, greedy, max_tokens {args.max_tokens}, K {args.k}, "
             f"{args.rounds} rounds, {args.threads} threads; llama-server arm: --spec-type {args.llama_spec}", ""]
    mismatches = []
    base = "flashserve off"
    for workload, ps in prompts.items():
        lines += [f"## {workload}: one request at a time, output tok/s (end to end)", "",
                  "| prompt | tokens | " + " | ".join(a.name for a in arms) + " | ngram / off | suffix / off |",
                  "|---|---|" + "---|" * (len(arms) + 2)]
        for p in ps:
            rates = {a.name: tok_per_s(single[workload][a.name][p["name"]]) for a in arms}
            runs = single[workload]
            for a in arms[1:3]:
                for x, y in zip(runs[base][p["name"]], runs[a.name][p["name"]]):
                    if x["text"] != y["text"]:
                        mismatches.append(f"{workload}/{p['name']}: {a.name} differs from {base}")
            tokens = runs[base][p["name"]][0]["tokens"]
            lines.append(f"| {p['name']} | {tokens} | " + " | ".join(f"{rates[a.name]:.1f}" for a in arms) +
                         f" | {rates['flashserve ngram'] / rates[base]:.2f}x | {rates['flashserve suffix'] / rates[base]:.2f}x |")
        total = {a.name: tok_per_s([r for p in ps for r in single[workload][a.name][p["name"]]]) for a in arms}
        lines.append("| **all** | | " + " | ".join(f"**{total[a.name]:.1f}**" for a in arms) +
                     f" | **{total['flashserve ngram'] / total[base]:.2f}x** | **{total['flashserve suffix'] / total[base]:.2f}x** |")
        dec = {a.name: decode_tok_per_s([r for p in ps for r in single[workload][a.name][p["name"]]]) for a in arms}
        lines.append("| after the first token | | " + " | ".join(f"{dec[a.name]:.1f}" for a in arms) +
                     f" | {dec['flashserve ngram'] / dec[base]:.2f}x | {dec['flashserve suffix'] / dec[base]:.2f}x |")
        if len(arms) == 5:
            same = sum(x["text"] == y["text"] for p in ps for x, y in
                       zip(single[workload][arms[3].name][p["name"]], single[workload][arms[4].name][p["name"]]))
            lines.append(f"\nllama-server {args.llama_spec} / plain: {total[arms[4].name] / total[arms[3].name]:.2f}x "
                         f"(identical text in {same} of {len(ps) * args.rounds} requests); flashserve ngram / "
                         f"llama-server {args.llama_spec}: {total['flashserve ngram'] / total[arms[4].name]:.2f}x")
        lines.append("")
    lines += [f"## concurrency {args.concurrency}: throughput, output tok/s (median of rounds)", "",
              "| workload | off | ngram | suffix | ngram / off | suffix / off |", "|---|---|---|---|---|---|"]
    for workload in prompts:
        med = {n: statistics.median(v) for n, v in batch[workload].items()}
        lines.append(f"| {workload} | {med[base]:.1f} | {med['flashserve ngram']:.1f} | {med['flashserve suffix']:.1f} | "
                     f"{med['flashserve ngram'] / med[base]:.2f}x | {med['flashserve suffix'] / med[base]:.2f}x |")
    for key, texts in batch_texts.items():
        for name, t in texts.items():
            if t != texts[base]:
                mismatches.append(f"concurrency {key}: {name} differs from {base}")
    acc = metrics["num_accepted_tokens"] / max(metrics["num_draft_tokens"], 1)
    length = 1 + metrics["num_accepted_tokens"] / max(metrics["num_drafts"], 1)
    lines += ["", f"flashserve /metrics over the run: {metrics['num_drafts']:.0f} verifications, "
              f"{metrics['num_draft_tokens']:.0f} draft tokens, {acc:.0%} accepted, mean acceptance length {length:.2f}",
              "", f"identical text, flashserve's arms: {'yes' if not mismatches else 'NO'}"]
    lines += [f"- {m}" for m in mismatches]
    text = "\n".join(lines) + "\n"
    open(os.path.join(args.out, "summary.md"), "w").write(text)
    json.dump({"single": single, "batch": batch}, open(os.path.join(args.out, "raw.json"), "w"))
    print(text)
    if mismatches:
        sys.exit(1)


if __name__ == "__main__":
    main()
