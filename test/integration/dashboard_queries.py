#!/usr/bin/env python3
"""dashboard_queries.py URL DASHBOARD JOB_ID: runs every query of a Grafana dashboard's panels
against the Prometheus at URL, with the dashboard's $job_id set to JOB_ID, and fails naming each
panel whose query Prometheus refuses or answers with no series. The dashboard's variable query
(label_values(slurm_train_step, job_id), Grafana's) is checked through the series API."""
import json
import sys
import urllib.parse
import urllib.request


def get(url, path, **params):
    with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(params, doseq=True)}", timeout=10) as r:
        return json.load(r)


def main():
    url, dashboard, job = sys.argv[1], sys.argv[2], sys.argv[3]
    d = json.load(open(dashboard))
    failures = 0
    for var in d["templating"]["list"]:
        q = var["query"]["query"]
        metric, label = q[len("label_values("):-1].split(", ")
        values = {s.get(label) for s in get(url, "/api/v1/series", **{"match[]": metric})["data"]}
        ok = job in values
        print(f"{'ok' if ok else 'FAIL'} variable ${var['name']}: {q} -> {sorted(v for v in values if v)}")
        failures += not ok
    for panel in d["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$job_id", job)
            try:
                answer = get(url, "/api/v1/query", query=expr)
            except urllib.error.HTTPError as e:
                answer = json.load(e)
            result = answer.get("data", {}).get("result", [])
            ok = answer.get("status") == "success" and len(result) > 0
            shown = [(r["metric"].get("rank"), r["value"][1]) for r in result][:4]
            print(f"{'ok' if ok else 'FAIL'} panel '{panel['title']}': {expr} -> {answer.get('error') or shown}")
            failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
