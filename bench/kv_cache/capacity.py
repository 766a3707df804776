#!/usr/bin/env python3
"""How many 2,048-token sequences a fixed --kv-cache-bytes holds at once, per KV cache type: one
flashserve server per type on the same budget, 16 requests of 1,900 prompt tokens + 148 generated
(ignore_eos) sent together; /metrics is polled for the most requests running at once and the
preemptions. Prefix caching is off and the prompts differ, so every sequence holds its own blocks.

  bench/kv_cache/capacity.py --model M.gguf [--kv-cache-bytes 268435456] [--types f16 q8_0]
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def metric(text, name):
    m = re.search(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def run(args, kv_type, port):
    log_path = os.path.join(args.out, f"capacity-{kv_type}.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([args.flashserve, "--threads", str(args.threads), "serve", "--model", args.model, "--port",
                             str(port), "--grpc-port", "0", "--kv-cache-dtype", kv_type, "--kv-cache-bytes",
                             str(args.kv_cache_bytes), "--no-prefix-caching", "--max-num-seqs", "64",
                             "--max-queue-time", "0"],  # a small pool queues requests for long: none is dropped
                            stdout=log, stderr=log)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        most, done = 0, threading.Event()

        def poll():
            nonlocal most
            while not done.is_set():
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
                most = max(most, int(metric(text, "flashserve_num_requests_running")))
                time.sleep(0.1)

        def one(i):
            prompt = [100 + (i * 7919 + j * 104729) % 40000 for j in range(args.prompt_tokens)]
            body = {"prompt": prompt, "max_tokens": args.output_tokens, "ignore_eos": True, "temperature": 0}
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            return json.load(urllib.request.urlopen(req, timeout=1800))["usage"]["completion_tokens"]

        poller = threading.Thread(target=poll)
        poller.start()
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.requests) as pool:
            tokens = sum(pool.map(one, range(args.requests)))
        seconds = time.perf_counter() - t0
        done.set()
        poller.join()
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        preempted = int(metric(text, "flashserve_num_preemptions_total"))
        pool = re.search(r"KV cache \S+: (\d+) blocks \((\d+) tokens\)", open(log_path).read())
        return {"type": kv_type, "most_running": most, "preemptions": preempted, "seconds": seconds,
                "output_tok_s": tokens / seconds, "blocks": int(pool.group(1)), "tokens": int(pool.group(2))}
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kv-cache-bytes", type=int, default=256 << 20)
    ap.add_argument("--types", nargs="+", default=["f16", "q8_0"])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=1900)
    ap.add_argument("--output-tokens", type=int, default=148)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flashserve", default=os.path.join(ROOT, "build", "server", "flashserve"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = [run(args, t, 18960 + i) for i, t in enumerate(args.types)]
    lines = [f"# KV cache capacity, --kv-cache-bytes {args.kv_cache_bytes}, {args.requests} requests of "
             f"{args.prompt_tokens} + {args.output_tokens} tokens, {os.path.basename(args.model)}", "",
             "| KV type | pool | whole sequences it holds | most running at once | preemptions | output tok/s | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        whole = r["tokens"] // (args.prompt_tokens + args.output_tokens)
        lines.append(f"| {r['type']} | {r['blocks']} blocks, {r['tokens']} tokens | {whole} | {r['most_running']} | "
                     f"{r['preemptions']} | {r['output_tok_s']:.1f} | {r['seconds']:.0f} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(args.out, "capacity.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
