"""python -m bench summary [files...]: a Markdown table of recorded results (min / median), then
the tables `peers` printed."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.floor import ROUND_TRIPS
from bench.peers.harness import PEERS, beside_python, table
from bench.target import REPO


def _rate(r: dict[str, Any]) -> str:
    return f"{r['min']:,.0f} / {r['median']:,.0f}"


def _verdict(r: dict[str, Any]) -> str:
    if "met" not in r:
        return ""
    return "met" if r["met"] else "**missed**"


def rows(doc: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    w = doc["server"].get("workers")
    out = []
    for r in doc["results"]:
        name, scen = r["name"], r["scenario"]
        cost = r.get("cpu_us_per_job_median")
        cost_txt = ""
        if cost:
            pg = f"{cost['postgres']:.0f}" if cost["postgres"] >= 0 else "n/a"
            cost_txt = f"server {cost['server']:.0f} + pg {pg} us/job"
        if scen in ("push-single", "push-batch", "work") or (scen == "floor" and "median" in r):
            out.append((f"w{w}", name, _rate(r) + " jobs/s", _verdict(r), cost_txt))
        elif scen == "floor" and "ratio" in r:
            out.append((f"w{w}", name, f"werk / least server {r['ratio']:.2f}", "", ""))
        elif scen == "floor":
            trips = r["runs"]
            p50 = "; ".join(
                f"{k} {statistics.median(t[k]['p50_ms'] for t in trips):.2f}" for k in ROUND_TRIPS
            )
            out.append((f"w{w}", name, f"p50 ms: {p50}", "", ""))
        elif scen == "sdk" and r.get("variant") == "targets":
            for row in r["rows"]:
                out.append((f"w{w}", f"SDK: {row['scenario']}", row["sdk"], row["target"], ""))
        elif scen == "sdk":
            worker = (cost or {}).get("worker")
            extra = f"; worker {worker:.0f} us/job" if worker is not None else ""
            client = f"; client {cost['client']:.1f} us/job" if cost else ""
            concurrency = r.get("params", {}).get("concurrency")
            label = f"sdk {r['variant']}" + (f" concurrency={concurrency}" if concurrency else "")
            out.append(
                (
                    f"w{w}",
                    label,
                    _rate(r) + " jobs/s",
                    "",
                    cost_txt + client + extra,
                )
            )
        elif scen == "backlog":
            out.append(
                (
                    f"w{w}",
                    f"backlog: {r['variant']}",
                    _rate(r) + " jobs/s",
                    f"ratio {r.get('ratio_to_empty', 0):.2f} "
                    f"({'met' if r.get('met') else '**missed**'})",
                    cost_txt,
                )
            )
        elif scen == "livez":
            us = sorted(x["client_us_per_request"] for x in r["runs"])[len(r["runs"]) // 2]
            out.append(
                (
                    f"w{w}",
                    "GET /livez, 32 clients (client check)",
                    _rate(r) + " req/s",
                    "",
                    f"client {us:.0f} us/request",
                )
            )
        elif scen == "latency":
            s = r["summary"]
            out.append(
                (
                    f"w{w}",
                    "latency, idle long poll, 1 job/10 ms",
                    f"p50 {s['p50_ms']['min']:.2f} / {s['p50_ms']['median']:.2f} ms; "
                    f"p99 {s['p99_ms']['min']:.2f} / {s['p99_ms']['median']:.2f} ms; "
                    f"max {s['max_ms']['min']:.1f} / {s['max_ms']['median']:.1f} ms",
                    _verdict(r),
                    "",
                )
            )
        elif scen == "idle":
            runs = r["runs"]
            conns = max(x.get("db_connections_max", -1) for x in runs)
            active = max(x.get("db_connections_active_max", -1) for x in runs)
            out.append(
                (
                    f"w{w}",
                    f"idle, {runs[0]['polls']} long polls",
                    f"RSS {r['rss_mb']['min']:.0f} / {r['rss_mb']['median']:.0f} MB; "
                    f"CPU {r['server_cpu_pct']['min']:.1f} / "
                    f"{r['server_cpu_pct']['median']:.1f} %; "
                    f"DB connections {conns} ({active} active)",
                    _verdict(r),
                    "",
                )
            )
        elif scen == "explain":
            out.append(
                (
                    f"w{w}",
                    f"EXPLAIN claim ({r['variant']})",
                    "werk_jobs_claim_idx" + (" used" if r["met"] else " NOT used"),
                    _verdict(r),
                    "",
                )
            )
        elif scen == "churn":
            out.append(
                (
                    f"w{w}",
                    f"churn, {r['variant']}",
                    f"{r['rate']['min']:,.0f} / {r['rate']['median']:,.0f} jobs/s; size "
                    f"end/first {r['growth_end']['min']:.2f} / "
                    f"{r['growth_end']['median']:.2f}x",
                    _verdict(r),
                    f"first {r['runs'][-1]['first_total_kb']:,} kB, end "
                    f"{r['runs'][-1]['end_total_kb']:,} kB",
                )
            )
    return out


def peers_tables(doc: dict[str, Any]) -> str:
    """The `peers` tables of one record, as the run printed them."""
    runs = {r["variant"]: r["runs"] for r in doc["results"] if r["scenario"] == "peers"}
    known = [peer for peer in PEERS if runs.get(peer.name)]
    if not known:
        return ""
    beside = beside_python(runs)
    return table(known, runs) + (f"\n\n{beside}" if beside else "")


def main(files: list[str]) -> None:
    paths = [Path(f) for f in files] or sorted((REPO / "bench" / "results").glob("*.json"))
    docs = [(p.name, json.loads(p.read_text())) for p in paths]
    print("| server | scenario | min / median | target | cost / notes |")
    print("|---|---|---|---|---|")
    for _, doc in docs:
        for row in rows(doc):
            print("| " + " | ".join(row) + " |")
    print()
    for name, doc in docs:
        peers = peers_tables(doc)
        if peers:
            print(f"`{name}`, peers:\n\n{peers}\n")
    for name, doc in docs:
        fs = doc.get("fsync_probe_start") or {}
        cpu = [doc.get(k, {}).get("median_ms") for k in ("cpu_probe_start", "cpu_probe_end")]
        print(
            f"- `{name}`: commit {doc['git']['commit'][:8]}"
            f"{' + uncommitted server changes' if doc['git'].get('server_dirty') else ''}, "
            f"server workers {doc['server'].get('workers')}, nice {doc.get('nice')}, "
            f"load average at start {doc['machine']['loadavg_at_start'][0]:.1f}, fsync probe "
            f"p50 {fs.get('p50_ms')} ms / p99 {fs.get('p99_ms')} ms, cpu probe (median ms, "
            f"start / end) {cpu[0]} / {cpu[1]}"
        )
