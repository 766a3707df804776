"""The soak's verdict (bench/serve/soak.sh): per-minute goodput at 1x and 2x, and the server's RSS.

Usage: soak_report.py SATURATION.json RATE1X.json RATE2X.json RSS.tsv
Every minute of 2x must keep at least 80% of the 1x run's goodput; RSS, after the first minute of
load, must not grow by more than 10%.
"""
import json
import sys


def minutes(report):
    return [m for m in report["intervals"] if m["num_requests"] > 0]


def row(label, m):
    errors = ", ".join(f"{k} {v}" for k, v in sorted(m["errors"].items())) or "-"
    return (f"{label:>8} {m['num_requests'] / 60:8.2f} {m['num_ok']:6d} {m['goodput']:8.3f} "
            f"{m['ttft']['median_ms']:9.0f} {m['ttft']['p99_ms']:9.0f} {m['tpot']['median_ms']:9.0f}  {errors}")


def main(saturation_path, rate1_path, rate2_path, rss_path):
    saturation = json.load(open(saturation_path))
    one, two = json.load(open(rate1_path)), json.load(open(rate2_path))
    print(f"saturation: {saturation['request_throughput']:.3f} requests/s "
          f"(closed loop; TTFT p50 {saturation['ttft']['median_ms']:.0f} ms, TPOT p50 {saturation['tpot']['median_ms']:.0f} ms)")
    header = f"{'minute':>8} {'offered':>8} {'ok':>6} {'goodput':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9}  errors"
    ok = True
    for name, report in (("1x", one), ("2x", two)):
        print(f"\n{name}: goodput {report['goodput']:.3f}/s over the run, {report['num_ok']} of {report['num_requests']} ok")
        print(header)
        for i, m in enumerate(minutes(report)):
            print(row(str(i + 1), m))
    base = sum(m["goodput"] for m in minutes(one)) / max(1, len(minutes(one)))
    worst = min((m["goodput"] for m in minutes(two)), default=0.0)
    ratio = worst / base if base > 0 else 0.0
    print(f"\n1x goodput per minute, mean: {base:.3f}/s; 2x, worst minute: {worst:.3f}/s; ratio {ratio:.2f} (target >= 0.80)")
    ok = ok and ratio >= 0.8

    samples = [tuple(map(int, line.split())) for line in open(rss_path) if len(line.split()) == 2]
    loaded = [kib for t, kib in samples if t >= 60] or [kib for _, kib in samples]
    if loaded:
        first, peak, last = loaded[0], max(loaded), loaded[-1]
        growth = (peak - first) / first
        print(f"RSS: {first / 1024:.0f} MiB after the first minute, peak {peak / 1024:.0f} MiB, last {last / 1024:.0f} MiB "
              f"({len(samples)} samples); growth {100 * growth:.1f}% (target <= 10%)")
        ok = ok and growth <= 0.10
    print("verdict:", "PASS" if ok else "FAIL")


if __name__ == "__main__":
    main(*sys.argv[1:5])
