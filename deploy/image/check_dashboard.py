"""Runs every query of the Grafana dashboard against a Prometheus; each must return data.

Usage: check_dashboard.py PROMETHEUS_URL MODEL_NAME DASHBOARD_JSON [TIMEOUT_S]

Variables are substituted as Grafana would for one model ($model_name, $__rate_interval = 1m).
Retries until every query has data or the timeout passes; exits 1 naming the queries without.
Standard library only: it runs wherever the image test runs.
"""

import json
import sys
import time
import urllib.parse
import urllib.request


def targets(dashboard, model):
    panels = list(dashboard["panels"])
    for panel in panels:
        panels.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            expr = target["expr"]
            for var, value in (("${model_name}", model), ("$model_name", model),
                               ("${__rate_interval}", "1m"), ("$__rate_interval", "1m")):
                expr = expr.replace(var, value)
            yield panel.get("title", ""), expr


def has_data(url, expr):
    query = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=10) as r:
        body = json.load(r)
    return body.get("status") == "success" and bool(body["data"]["result"])


def main():
    url, model, path = sys.argv[1], sys.argv[2], sys.argv[3]
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 60
    with open(path) as f:
        queries = list(targets(json.load(f), model))
    deadline = time.time() + timeout
    while True:
        missing = [(title, expr) for title, expr in queries if not has_data(url, expr)]
        if not missing or time.time() > deadline:
            break
        time.sleep(2)
    for title, expr in missing:
        print(f"no data: [{title}] {expr}")
    print(f"dashboard: {len(queries) - len(missing)} of {len(queries)} panel queries returned data")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
