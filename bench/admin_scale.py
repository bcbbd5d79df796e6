"""How the operators' surface holds up on a big queue: fills a running server with --jobs jobs
(through the API) and times the dashboard pages, the admin lists and /metrics.

    werk serve &                                  # or any server; pass --token when it has tokens
    python -m bench.admin_scale --url http://127.0.0.1:7420 --jobs 100000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import httpx

PAGES = [
    "/",
    "/queues",
    "/queues/big?state=available",
    "/queues/big?state=available&order=oldest",
    "/dead",
    "/retries",
    "/scheduled",
    "/workers",
    "/v1/queues",
    "/v1/jobs?queue=big&state=available&limit=50",
    "/v1/jobs?state=dead&limit=50",
    "/v1/history?days=180",
    "/metrics",
]


def fill(http: httpx.Client, jobs: int, batch: int = 1000) -> float:
    started = time.perf_counter()
    for offset in range(0, jobs, batch):
        n = min(batch, jobs - offset)
        body = {"jobs": [{"jobtype": "Bench", "queue": "big", "args": [offset + i]}
                         for i in range(n)]}  # fmt: skip
        r = http.post("/v1/jobs/batch", json=body)
        r.raise_for_status()
    return time.perf_counter() - started


def time_page(http: httpx.Client, path: str, rounds: int) -> dict[str, Any]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        r = http.get(path)
        r.raise_for_status()
        samples.append((time.perf_counter() - started) * 1000)
        if "next_cursor" in r.text and path.startswith("/v1/jobs"):
            cursor = r.json()["next_cursor"]
            if cursor:  # a deep page costs the same as the first (keyset pagination)
                started = time.perf_counter()
                http.get(f"{path}&cursor={cursor}").raise_for_status()
                samples.append((time.perf_counter() - started) * 1000)
    return {
        "path": path,
        "p50_ms": round(statistics.median(samples), 1),
        "max_ms": round(max(samples), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:7420")
    parser.add_argument("--token", help="an admin token (when the server has tokens)")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    # The dashboard checks the origin of unsafe requests only; GETs need no extra headers.
    with httpx.Client(base_url=args.url, headers=headers, timeout=120) as http:
        seconds = fill(http, args.jobs) if args.jobs else 0.0
        results = [time_page(http, p, args.rounds) for p in PAGES]
    report = {"jobs": args.jobs, "fill_seconds": round(seconds, 1), "pages": results}
    for row in results:
        print(f"{row['path']:<48} p50 {row['p50_ms']:>8} ms   max {row['max_ms']:>8} ms")
    if args.output:
        with open(args.output, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
