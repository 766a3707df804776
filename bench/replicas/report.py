"""The report scripts/test_replicas.sh prints: cache_aware against round_robin side by side, then
the failover run. Usage: report.py OUT_DIR REPLICAS"""

import json
import os
import subprocess
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def hit_rates(out, tag):
    def read(name):
        with open(os.path.join(out, f"{tag}-cache-{name}.txt")) as f:
            return [tuple(map(int, line.split())) for line in f if line.strip()]
    rates = []
    for (h0, q0), (h1, q1) in zip(read("before"), read("after")):
        rates.append((h1 - h0) / (q1 - q0) if q1 > q0 else 0.0)
    return rates


def healthy(path):
    try:
        workers = load(path).get("workers", [])
    except (OSError, ValueError):
        return "?"
    return ", ".join(f"{w['url'].rsplit(':', 1)[1]}:{'healthy' if w.get('is_healthy') else 'unhealthy'}"
                     for w in workers)


def main():
    out, replicas = sys.argv[1], int(sys.argv[2])
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    flags = next((l.split(":", 1)[1].split() for l in cpu.splitlines() if l.startswith("Flags")), [])
    isa = " ".join(f for f in flags if f.startswith(("avx2", "avx512f", "avx512_vnni", "amx")))
    print(f"# {replicas} flashserve replicas behind smg: cache_aware vs round_robin\n")
    print(f"CPU: {model}, {os.cpu_count()} cores ({isa}); workload: bench/replicas/tenants.py, see test_replicas.sh\n")
    runs = {p: load(os.path.join(out, f"{p}.json")) for p in ("cache_aware", "round_robin")}
    print("| policy | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | req/s | output tok/s | ok / sent | prefix-cache hit rate per replica |")
    print("|---|---|---|---|---|---|---|---|")
    for policy, r in runs.items():
        rates = " / ".join(f"{x:.0%}" for x in hit_rates(out, policy))
        print(f"| {policy} | {r['ttft']['median_ms']:.0f} | {r['ttft']['p99_ms']:.0f} | {r['e2e']['median_ms']:.0f} | "
              f"{r['request_throughput']:.2f} | {r['output_throughput']:.1f} | {r['num_ok']} / {r['num_requests']} | {rates} |")
    ca, rr = runs["cache_aware"]["ttft"], runs["round_robin"]["ttft"]
    print(f"\nround_robin / cache_aware: TTFT p50 {rr['median_ms'] / ca['median_ms']:.2f}x, "
          f"p99 {rr['p99_ms'] / ca['p99_ms']:.2f}x\n")
    f = load(os.path.join(out, "failover.json"))
    with open(os.path.join(out, "failover-events.txt")) as fh:
        events = fh.read().strip().replace("\n", "; ")
    with open(os.path.join(out, "failover-restarted-served.txt")) as fh:
        served = fh.read().strip()
    print("## One replica killed (SIGKILL) a third of the way in, restarted 20 s later (cache_aware)\n")
    print(f"- events: {events}")
    print(f"- clients: {f['num_ok']} of {f['num_requests']} requests ok, errors: {json.dumps(f['errors'])}")
    print(f"- gateway 3 s after the kill: {healthy(os.path.join(out, 'failover-workers-after-kill.json'))}")
    print(f"- gateway 5 s after the restart was ready: {healthy(os.path.join(out, 'failover-workers-after-restart.json'))}")
    print(f"- requests the restarted replica served: {served}")


if __name__ == "__main__":
    main()
