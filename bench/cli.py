"""python -m bench run <scenario...> [options]  — see bench/README.md."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import ab, floor, instructions, least_server, procstat, report, scenarios, sdk
from bench.peers import harness as peers_harness
from bench.scenarios import Context
from bench.target import REPO, Db, Target, resolve_database, start_server

ORDER = [
    "livez", "push-single", "push-batch", "work", "sdk", "peers", "latency", "idle", "floor",
    "backlog", "inflight", "churn", "completed", "search",
]  # fmt: skip
NEEDS_DB = {
    "backlog", "churn", "completed", "explain", "floor", "inflight", "peers", "sdk", "search",
}  # fmt: skip

TARGETS = {
    # name -> (metric, comparison, bar)
    "push-single clients=32": ("rate", ">=", 6000),
    "push-batch batch=1000": ("rate", ">=", 100_000),
    "push-batch batch=1000 minimal": ("rate", ">=", 100_000),
    "work count=100 batch-ack": ("rate", ">=", 60_000),
    "work count=1 single-ack": ("rate", ">=", 4000),
}


def _summary(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _fmt(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}"


class Runner:
    def __init__(self, ctx: Context, out: dict[str, Any], peers: list[str] | None = None) -> None:
        self.ctx = ctx
        self.out = out
        self.peer_names = peers or peers_harness.NAMES

    def record(self, result: dict[str, Any], line: str) -> None:
        self.out["results"].append(result)
        print(line, flush=True)

    async def rate(
        self,
        scenario: str,
        variant: str,
        params: dict[str, Any],
        once: Callable[[], Awaitable[dict[str, Any]]],
        *,
        reset: bool = True,
        extra: str = "",
    ) -> dict[str, Any]:
        runs = []
        for _ in range(self.ctx.repeat):
            if reset:
                await scenarios.reset(self.ctx)
            runs.append(await once())
        return self.rated(scenario, variant, params, runs, extra=extra)

    async def in_turn(
        self,
        scenario: str,
        params: dict[str, Any],
        first: tuple[str, Callable[[], Awaitable[dict[str, Any]]]],
        second: tuple[str, Callable[[], Awaitable[dict[str, Any]]]],
    ) -> tuple[dict[str, Any], dict[str, Any], float]:
        """Two rows taken in turn, a run of each per round: the machine's speed drifts within a
        sitting, and the ratio of each round's pair follows what differs between the rows rather
        than the drift. Returns both rows and the median of the rounds' ratios, first / second."""
        runs: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        for _ in range(self.ctx.repeat):
            for taken, (_, once) in zip(runs, (first, second), strict=True):
                await scenarios.reset(self.ctx)
                taken.append(await once())
        ratio = statistics.median(a["rate"] / b["rate"] for a, b in zip(*runs, strict=True))
        return (
            self.rated(scenario, first[0], params, runs[0]),
            self.rated(scenario, second[0], params, runs[1]),
            ratio,
        )

    def rated(
        self,
        scenario: str,
        variant: str,
        params: dict[str, Any],
        runs: list[dict[str, Any]],
        *,
        extra: str = "",
    ) -> dict[str, Any]:
        """Records ``runs`` of one rate scenario (``rate`` runs them back to back)."""
        rates = [r["rate"] for r in runs]
        s = _summary(rates)
        name = f"{scenario} {variant}".strip()
        result: dict[str, Any] = {
            "scenario": scenario,
            "variant": variant,
            "name": name,
            "params": params,
            "unit": "jobs/s",
            "runs": runs,
            **s,
        }
        target = TARGETS.get(name)
        if target and scenario not in ("backlog", "completed"):
            result["target"] = {"metric": "median jobs/s", "bar": target[2]}
            result["met"] = s["median"] >= target[2]
        cpu = runs[-1].get("cpu", {})
        cost = {
            k: statistics.median(r["cpu_us_per_job"][k] for r in runs)
            for k in ("client", "server", "postgres")
        }
        ceiling = 2e6 / max(cost["server"] + cost["postgres"], 1e-9)
        result["cpu_us_per_job_median"] = cost
        result["cpu_bound_ceiling"] = round(ceiling)
        waits = runs[-1].get("pg_waits") or {}
        sessions = list(waits.get("avg_active_sessions", {}).items())[:3]
        wtxt = ", ".join(f"{k} {v}" for k, v in sessions)
        wtxt = f"  | pg sessions: {wtxt}" if wtxt else ""
        worker = ""
        if all("worker_us_per_job" in r for r in runs):  # the SDK worker: a process of its own
            cost["worker"] = statistics.median(r["worker_us_per_job"] for r in runs)
            worker = f" worker={cost['worker']:.0f}"
        cpu_txt = (
            (
                f"  | cpu us/job server={cost['server']:.0f} pg={cost['postgres']:.0f} "
                f"client={cost['client']:.0f}{worker} (2-core ceiling {ceiling:,.0f}/s)  "
                f"other load={cpu.get('other_pct')}%"
            )
            if cpu
            else ""
        )
        verdict = ""
        if "met" in result:
            verdict = f"  target>={target[2]:,} {'MET' if result['met'] else 'MISSED'}"  # type: ignore[index]
        ptxt = "  ".join(f"{k}={v}" for k, v in params.items())
        line = (
            f"{scenario:<12} {variant:<24} {ptxt}  runs={len(runs)}  "
            f"min={_fmt(s['min'])} median={_fmt(s['median'])} jobs/s"
            f"{extra}{verdict}{cpu_txt}{wtxt}"
        )
        self.record(result, line)
        return result

    # -- scenarios --------------------------------------------------------------------------

    async def livez(self) -> None:
        c = self.ctx
        runs = [await scenarios.livez(c) for _ in range(c.repeat)]
        s = _summary([r["rate"] for r in runs])
        us = statistics.median(r["client_us_per_request"] for r in runs)
        self.record(
            {
                "scenario": "livez",
                "variant": "clients=32",
                "name": "livez clients=32",
                "unit": "requests/s",
                "runs": runs,
                **s,
            },
            f"{'livez':<12} {'clients=32':<24} requests={runs[0]['jobs']}  runs={len(runs)}  "
            f"min={_fmt(s['min'])} median={_fmt(s['median'])} req/s  "
            f"(client CPU {us:.0f} us/request, i.e. {1e6 / us:,.0f} req/s per client core)",
        )

    async def push_single(self) -> None:
        c = self.ctx
        for clients in c.push_clients:
            r = await self.rate(
                "push-single",
                f"clients={clients}",
                {"jobs": c.jobs},
                lambda k=clients: scenarios.push_single(c, k),
            )
            c.baselines[r["name"]] = r["median"]

    async def push_batch(self) -> None:
        c = self.ctx
        # Each size with the full answer (the stored jobs, what the SDKs read), the largest also
        # with the short one (Prefer: return=minimal, jids only).
        runs = [(batch, False) for batch in c.batch_sizes] + [(max(c.batch_sizes), True)]
        for batch, minimal in runs:
            r = await self.rate(
                "push-batch",
                f"batch={batch}" + (" minimal" if minimal else ""),
                {"clients": c.batch_clients, "jobs": c.jobs, "prefer_minimal": minimal},
                lambda b=batch, m=minimal: scenarios.push_batch(c, b, c.batch_clients, minimal=m),
            )
            c.baselines[r["name"]] = r["median"]

    async def work(self) -> None:
        c = self.ctx
        for count, workers, label in (
            (1, c.work_workers_1, "count=1 single-ack"),
            (100, c.work_workers_100, "count=100 batch-ack"),
        ):
            if workers <= 0:  # left out (--work-workers-1 0 or --work-workers-100 0)
                continue
            r = await self.rate(
                "work",
                label,
                {"workers": workers, "jobs": c.jobs},
                lambda k=count, w=workers: scenarios.work(c, k, w),
            )
            c.baselines[r["name"]] = r["median"]

    async def sdk(self) -> None:
        """The Python SDK beside the lean client, in one run (see bench/sdk.py), and a table
        of issue 30's targets with both figures."""
        c = self.ctx
        m: dict[str, dict[str, Any]] = {}
        ratios: dict[str, float] = {}

        async def both(key: str, label: str, params: dict[str, Any], once: Any) -> None:
            m[key] = await self.rate("sdk", label, params, once)

        async def beside(key: str, label: str, lean_label: str, once: Any, lean: Any) -> None:
            m[key], m[f"lean_{key}"], ratios[key] = await self.in_turn(
                "sdk", {"jobs": c.jobs}, (label, once), (lean_label, lean)
            )

        await beside(
            "push1",
            "Client.push",
            "lean push clients=1",
            functools.partial(sdk.push, c, 1),
            functools.partial(scenarios.push_single, c, 1),
        )
        await beside(
            "push8",
            "AsyncClient.push in-flight=8",
            "lean push clients=8",
            functools.partial(sdk.push_async, c, 8),
            functools.partial(scenarios.push_single, c, 8),
        )
        await beside(
            "many",
            "push_many batch=1000",
            "lean push-batch=1000 clients=1",
            functools.partial(sdk.push, c, 1000),
            functools.partial(scenarios.push_batch, c, 1000, 1, sdk.QUEUE, as_sdk=True),
        )
        await both(
            "jids",
            "push_jids batch=1000",
            {"jobs": c.jobs},
            functools.partial(sdk.push, c, 1000, jids_only=True),
        )
        for key, handler, concurrency in (
            ("work_async_200", "async", 200),
            ("work_async_1000", "async", 1000),
            ("work_sync", "sync", 50),
        ):
            await both(
                key,
                f"werk-worker fetch=100 {handler}",
                {"concurrency": concurrency, "jobs": c.jobs},
                functools.partial(sdk.worker, c, 100, handler, concurrency),
            )
        if c.work_workers_100 > 0:
            await both(
                "lean_work",
                "lean work count=100",
                {"workers": c.work_workers_100, "jobs": c.jobs},
                functools.partial(scenarios.work, c, 100, c.work_workers_100),
            )
        lat = [await sdk.latency(c) for _ in range(c.repeat)]
        lean_lat = [await scenarios.latency(c) for _ in range(c.repeat)]
        built = sdk.construction(c)
        latency = {k: statistics.median(r[k] for r in lat) for k in ("p50_ms", "p99_ms")}
        lean_latency = {k: statistics.median(r[k] for r in lean_lat) for k in ("p50_ms", "p99_ms")}
        rows = sdk.target_rows(m, ratios, latency, lean_latency, built)
        self.record(
            {
                "scenario": "sdk",
                "variant": "targets",
                "name": "sdk targets",
                "latency_runs": lat,
                "lean_latency_runs": lean_lat,
                "construction_ms": built,
                "rows": rows,
            },
            sdk.target_table(rows),
        )

    async def peers(self) -> None:
        """Werk's TypeScript and Go clients and the PostgreSQL queues users would choose instead,
        each through its own library (see bench/peers)."""
        await peers_harness.run(self.ctx, self.peer_names, self.record)

    async def latency(self) -> None:
        c = self.ctx
        runs = [await scenarios.latency(c) for _ in range(c.repeat)]
        summary = {k: _summary([r[k] for r in runs]) for k in ("p50_ms", "p99_ms", "max_ms")}
        met = summary["p50_ms"]["median"] <= 1.5 and summary["p99_ms"]["median"] <= 4.0
        parts = "  ".join(
            f"{k[:-3]} min={v['min']:.2f} median={v['median']:.2f}" for k, v in summary.items()
        )
        self.record(
            {
                "scenario": "latency",
                "variant": "idle long poll",
                "name": "latency",
                "unit": "ms",
                "runs": runs,
                "summary": summary,
                "target": {"p50_ms": 1.5, "p99_ms": 4.0},
                "met": met,
            },
            f"{'latency':<12} {'idle long poll':<24} interval={c.latency_interval * 1e3:.0f}ms  "
            f"jobs={c.latency_jobs}  runs={len(runs)}  {parts} ms  "
            f"target p50<=1.5 p99<=4 {'MET' if met else 'MISSED'}",
        )

    async def idle(self) -> None:
        c = self.ctx
        runs = [await scenarios.idle(c) for _ in range(c.repeat)]
        rss = _summary([r["rss_mb"] for r in runs])
        cpu = _summary([r["server_cpu_pct"] for r in runs])
        conns = [r.get("db_connections_max") for r in runs]
        active = [r.get("db_connections_active_max") for r in runs]
        # the two pools (10 + 3 by default) + one LISTEN connection per server process is the
        # most a server without per-poll connections can hold, whatever the number of polls
        bound = (c.target.workers or 1) * (c.pool_max + 1)
        no_conn_per_poll = all(x is not None and x <= bound for x in conns)
        met = no_conn_per_poll and rss["median"] <= 150 and cpu["median"] <= 5
        self.record(
            {
                "scenario": "idle",
                "variant": f"polls={c.idle_polls}",
                "name": "idle",
                "runs": runs,
                "rss_mb": rss,
                "server_cpu_pct": cpu,
                "target": {"rss_mb": 150, "cpu_pct": 5, "db_connections": "not one per poll"},
                "met": met,
            },
            f"{'idle':<12} {'polls=' + str(c.idle_polls):<24} runs={len(runs)}  "
            f"rss min={rss['min']:.0f} median={rss['median']:.0f} MB (all server processes; "
            f"largest {max(r.get('rss_mb_largest_process', 0) for r in runs):.0f} MB)  "
            f"server cpu min={cpu['min']:.1f} median={cpu['median']:.1f} %  "
            f"db connections max={conns} (bound {bound}) active max={active}  "
            f"errors={[r['errors'] for r in runs]}  target rss<=150MB cpu<=5% "
            f"{'MET' if met else 'MISSED'}",
        )

    async def floor(self) -> None:
        """The server's SQL alone (no HTTP), the most the matching scenario could reach; and a
        single push through the least server beside werk serve, from each client."""
        c = self.ctx
        for lean in (False, True):
            tag = " lean" if lean else ""
            params = {"connections": 2, "lean_schema": lean}
            push = functools.partial(floor.push_batches, c, lean=lean)
            claim = functools.partial(floor.claim_and_ack, c, lean=lean)
            await self.rate("floor", f"sql push batch=1000{tag}", params, push)
            await self.rate("floor", f"sql claim+ack 100{tag}", params, claim)
        await self.rate(
            "floor",
            "sql push one at a time",
            {"connections": 1},
            functools.partial(floor.push_singly, c),
        )
        assert c.target.database_url is not None
        with least_server.started(c.target.database_url, c.target.pg_uid) as least:
            at_least = dataclasses.replace(c, target=least)
            for variant, label, push in (
                ("http push", "http push clients=1", scenarios.push_single),
                ("Client.push", "Client.push", sdk.push),
            ):
                werk_row, least_row, ratio = await self.in_turn(
                    "floor",
                    {"clients": 1, "jobs": c.jobs},
                    (f"{label} werk", functools.partial(push, c, 1)),
                    (f"{label} least server", functools.partial(push, at_least, 1)),
                )
                self.record(
                    {
                        "scenario": "floor",
                        "variant": variant,
                        "name": f"floor {variant}",
                        "ratio": ratio,
                    },
                    f"{'floor':<12} {label:<24} werk {werk_row['median']:,.0f} jobs/s, "
                    f"the least server on this stack {least_row['median']:,.0f} jobs/s "
                    f"(bench/least_server.py); werk / least, run by run: {ratio:.2f}",
                )
        trips = [await floor.idle_round_trips(c) for _ in range(c.repeat)]
        parts = "  ".join(
            f"{name} p50 {statistics.median(t[name]['p50_ms'] for t in trips):.2f} ms"
            for name in floor.ROUND_TRIPS
        )
        self.record(
            {
                "scenario": "floor",
                "variant": "idle round trips",
                "name": "floor idle",
                "runs": trips,
            },
            f"{'floor':<12} {'idle round trips':<24} one every "
            f"{c.latency_interval * 1e3:.0f} ms: {parts}",
        )

    async def explain(self) -> dict[str, Any]:
        c = self.ctx
        seeded = await scenarios.seed_backlog(c)
        ex = seeded["explain"]
        self.record(
            {
                "scenario": "explain",
                "variant": f"backlog={c.backlog}",
                "name": "explain",
                **seeded,
                "met": ex["uses_claim_index"],
            },
            f"{'explain':<12} {'claim query':<24} backlog={c.backlog} dead={c.dead}  "
            f"werk_jobs_claim_idx in custom+generic plan: "
            f"{'yes' if ex['uses_claim_index'] else 'NO'}  (seeded in {seeded['seconds']} s)",
        )
        return seeded

    async def backlog(self) -> None:
        c = self.ctx
        # baselines on an empty queue, unless this invocation measured them already
        subs: list[tuple[str, dict[str, Any], Callable[[], Awaitable[dict[str, Any]]]]] = [
            ("push-single clients=32", {}, lambda: scenarios.push_single(c, 32)),
            ("push-batch batch=1000", {}, lambda: scenarios.push_batch(c, 1000, c.batch_clients)),
            (
                "work count=1 single-ack",
                {},
                lambda: scenarios.work(c, 1, c.work_workers_1, seed_jobs=False),
            ),
            (
                "work count=100 batch-ack",
                {},
                lambda: scenarios.work(c, 100, c.work_workers_100, seed_jobs=False),
            ),
        ]
        for name, _, _ in subs:
            await self._baseline(name)
        await self.explain()
        met = True
        for name, _, once in subs:
            base = c.baselines[name]
            r = await self.rate(
                "backlog", name, {"backlog": c.backlog, "dead": c.dead}, once, reset=False, extra=""
            )
            met = self._versus_empty(r, base) and met
        async with c.db() as db:
            self.out["results"][-1]["sizes_after"] = await db.sizes()
            explain = await db.explain_claim(scenarios.QUEUE)
        self.record(
            {
                "scenario": "explain",
                "variant": "after backlog runs",
                "name": "explain-after",
                "explain": explain,
                "met": explain["uses_claim_index"],
            },
            f"{'explain':<12} {'after backlog runs':<24} werk_jobs_claim_idx in "
            "custom+generic "
            f"plan: {'yes' if explain['uses_claim_index'] else 'NO'}",
        )

    async def _baseline(self, name: str) -> float:
        """The empty-queue median of ``name`` (a push or work variant), measured now unless
        this invocation measured it already."""
        c = self.ctx
        if name not in c.baselines:
            scen, _, variant = name.partition(" ")
            if scen == "push-single":
                await self.push_single_only(32)
            elif scen == "push-batch":
                r = await self.rate(
                    "push-batch",
                    variant,
                    {"clients": c.batch_clients},
                    lambda: scenarios.push_batch(c, 1000, c.batch_clients),
                )
                c.baselines[name] = r["median"]
            else:
                count, workers = (
                    (1, c.work_workers_1) if "count=1 " in name + " " else (100, c.work_workers_100)
                )
                r = await self.rate(
                    "work",
                    variant,
                    {"workers": workers, "jobs": c.jobs},
                    lambda k=count, w=workers: scenarios.work(c, k, w),
                )
                c.baselines[name] = r["median"]
        return c.baselines[name]

    def _versus_empty(self, r: dict[str, Any], base: float, bar: float = 0.8) -> bool:
        ratio = r["median"] / base
        r["empty_median"] = base
        r["ratio_to_empty"] = round(ratio, 3)
        r["met"] = ratio >= bar
        print(
            f"{'':<12} {'':<24} vs empty median {_fmt(base)} jobs/s: ratio {ratio:.3f} "
            f"{f'MET (>={bar:.2f})' if r['met'] else f'MISSED (<{bar:.2f})'}",
            flush=True,
        )
        return bool(r["met"])

    async def inflight(self) -> None:
        """work 1 and work 100 while --in-flight jobs sit fetched and not yet acked (held by a
        worker for an hour), claimed after the statistics were taken: they then say no job is
        active, the case in which a lease statement that names the state walks every active
        job."""
        c = self.ctx
        for count, workers, name in (
            (1, c.work_workers_1, "work count=1 single-ack"),
            (100, c.work_workers_100, "work count=100 batch-ack"),
        ):
            if not workers:
                continue
            base = await self._baseline(name)

            async def once(k: int = count, w: int = workers) -> dict[str, Any]:
                await scenarios.seed(c, scenarios.QUEUE, c.jobs)  # and ANALYZE
                async with c.db() as db:
                    await db.seed("held-", "bench-held", c.in_flight, held=True)
                return await scenarios.work(c, k, w, seed_jobs=False)

            r = await self.rate("inflight", name, {"in_flight": c.in_flight}, once)
            self._versus_empty(r, base)

    async def completed(self) -> None:
        """push-single 32, push-batch 1,000, work 1 and work 100, and churn, on an empty table,
        then beside --completed-rows completed jobs kept with their result (seeded with SQL),
        then on an empty table again: each figure beside the mean of the two empty ones, which
        brackets it in time. The claim's plan is checked on the table holding them."""
        c = self.ctx
        subs: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
            ("push-single clients=32", lambda: scenarios.push_single(c, 32)),
            ("push-batch batch=1000", lambda: scenarios.push_batch(c, 1000, c.batch_clients)),
            ("work count=1 single-ack", lambda: scenarios.work(c, 1, c.work_workers_1)),
            ("work count=100 batch-ack", lambda: scenarios.work(c, 100, c.work_workers_100)),
        ]
        empty: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in subs}
        empty_churn: list[dict[str, Any]] = []

        async def empty_pass() -> None:
            for name, once in subs:
                empty[name].append(await self.rate("completed", f"empty {name}", {}, once))
            if c.churn:
                empty_churn.append(await scenarios.churn(c))
                self._churn_line("empty", empty_churn[-1])

        await empty_pass()
        seeded = await scenarios.seed_completed(c)
        ex = seeded["explain"]
        claim_kb = int(seeded["sizes"]["per_index"].get("werk_jobs_claim_idx", 0)) // 1024
        self.record(
            {
                "scenario": "completed",
                "variant": "seed",
                "name": "completed seed",
                **seeded,
                "met": ex["uses_claim_index"],
            },
            f"{'completed':<12} {'seed':<24} rows={c.completed_rows} in {seeded['seconds']} s  "
            f"table+indexes {int(seeded['sizes']['total']) // 2**20} MB "
            f"(claim index {claim_kb} kB)  werk_jobs_claim_idx in custom+generic plan: "
            f"{'yes' if ex['uses_claim_index'] else 'NO'}",
        )
        kept: dict[str, dict[str, Any]] = {}
        kept_churn = None
        c.keep_queue = scenarios.KEPT_QUEUE
        try:
            for name, once in subs:
                kept[name] = await self.rate(
                    "completed", f"kept {name}", {"completed_rows": c.completed_rows}, once
                )
            if c.churn:
                kept_churn = await scenarios.churn(c)
                self._churn_line("kept", kept_churn)
        finally:
            c.keep_queue = None
        await empty_pass()
        print(f"# beside {c.completed_rows:,} completed jobs, against the mean of the empty runs:")
        met = True
        for name, _ in subs:
            base = statistics.mean(r["median"] for r in empty[name])
            pg = statistics.mean(r["cpu_us_per_job_median"]["postgres"] for r in empty[name])
            kept_pg = kept[name]["cpu_us_per_job_median"]["postgres"]
            print(
                f"{'completed':<12} {name:<24} PostgreSQL CPU {kept_pg:.0f} us/job "
                f"(empty: {pg:.0f}): ratio {kept_pg / pg:.3f}",
                flush=True,
            )
            met = self._versus_empty(kept[name], base, bar=0.95) and met
        if kept_churn is not None:
            base = statistics.mean(r["rate"] for r in empty_churn)
            grown = statistics.mean(r["end_total_kb"] - r["start_total_kb"] for r in empty_churn)
            kept_grown = kept_churn["end_total_kb"] - kept_churn["start_total_kb"]
            pg = statistics.mean(r["cpu_us_per_job"]["postgres"] for r in empty_churn)
            kept_pg = kept_churn["cpu_us_per_job"]["postgres"]
            print(
                f"{'completed':<12} {'churn':<24} rate ratio {kept_churn['rate'] / base:.3f}  "
                f"PostgreSQL CPU {kept_pg:.0f} us/job (empty: {pg:.0f}): ratio {kept_pg / pg:.3f}  "
                f"growth during the run {kept_grown:,} kB (empty: {grown:,.0f} kB)",
                flush=True,
            )
            self.out["results"].append(
                {"scenario": "completed", "variant": "churn", "name": "completed churn",
                 "empty_runs": empty_churn, "kept_run": kept_churn}
            )  # fmt: skip
        self.out["results"].append({"scenario": "completed", "name": "completed", "met": met})

    def _churn_line(self, label: str, r: dict[str, Any]) -> None:
        print(
            f"{'completed':<12} {label + ' churn':<24} jobs={self.ctx.churn}  "
            f"rate={_fmt(r['rate'])} jobs/s  table+indexes start={r['start_total_kb']:,} kB "
            f"end={r['end_total_kb']:,} kB (+{r['end_total_kb'] - r['start_total_kb']:,})  "
            f"cpu us/job server={r['cpu_us_per_job']['server']:.0f} "
            f"pg={r['cpu_us_per_job']['postgres']:.0f}",
            flush=True,
        )

    async def search(self) -> None:
        c = self.ctx
        r = await scenarios.search(c)
        per_index = r["sizes"]["per_index"]
        words_mb = int(per_index.get("werk_jobs_words_idx", 0)) // 2**20
        available_mb = int(per_index.get("werk_jobs_available_words_idx", 0)) // 2**20
        self.record(
            {"scenario": "search", "variant": f"jobs={r['jobs']}", "name": "search", **r},
            f"{'search':<12} seeded {r['jobs']:,} available + {r['completed']:,} completed jobs "
            f"in {r['seed_seconds']} s; table+indexes {int(r['sizes']['total']) // 2**20} MB "
            f"(words index {words_mb} MB; over available jobs: {r['available_index']}, "
            f"{available_mb} MB)",
        )
        for row in r["rows"]:
            index = ""
            if "words_indexes" in row:
                index = (
                    f"  EXPLAIN ANALYZE: {row['execution']}, words indexes read: "
                    f"{', '.join(row['words_indexes']) or 'none'}, "
                    f"{row['rows_filtered']:,} jobs read and left out"
                )
            print(
                f"{'':<12} {row['query']:<52} p50 {row['p50_ms']:>8} ms  max {row['max_ms']:>8} ms"
                f"{index}",
                flush=True,
            )

    async def push_single_only(self, clients: int) -> None:
        c = self.ctx
        r = await self.rate(
            "push-single",
            f"clients={clients}",
            {"jobs": c.jobs},
            lambda: scenarios.push_single(c, clients),
        )
        c.baselines[r["name"]] = r["median"]

    async def churn(self) -> None:
        c = self.ctx
        runs = []
        for _ in range(c.repeat):
            runs.append(await scenarios.churn(c))
        s = _summary([r["rate"] for r in runs])
        g = _summary([r["growth_end"] for r in runs])
        gs = _summary([r["growth_settled"] for r in runs])
        met = g["median"] <= 2.0
        self.record(
            {
                "scenario": "churn",
                "variant": f"jobs={c.churn}",
                "name": "churn",
                "runs": runs,
                "rate": s,
                "growth_end": g,
                "growth_settled": gs,
                "target": {"growth_end": 2.0},
                "met": met,
            },
            f"{'churn':<12} {'jobs=' + str(c.churn):<24} runs={len(runs)}  "
            f"rate min={_fmt(s['min'])} median={_fmt(s['median'])} jobs/s  "
            f"size end/first min={g['min']:.2f} median={g['median']:.2f}x "
            f"(after {c.churn_settle:.0f} s: {gs['median']:.2f}x; "
            f"first={runs[-1]['first_total_kb']:,} kB "
            f"end={runs[-1]['end_total_kb']:,} kB)  target<=2x {'MET' if met else 'MISSED'}",
        )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run scenarios")
    r.add_argument("scenarios", nargs="+", help=f"any of {', '.join(ORDER)}, explain, or all")
    r.add_argument("--url", help="an already running server (else one is started)")
    r.add_argument("--server-pid", type=int, help="with --url: the server's pid, for CPU/RSS")
    r.add_argument(
        "--database-url",
        help="the server's database (seeding, sizes, EXPLAIN); "
        "default: fresh database werk_bench on postgresql://postgres@127.0.0.1:5432/, "
        "or the embedded PostgreSQL",
    )
    r.add_argument(
        "--server-workers",
        type=int,
        nargs="+",
        default=[1],
        help="werk serve --workers; several values run everything once per value",
    )
    r.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the started server (e.g. WERK_POOL_MAX_SIZE=20)",
    )
    r.add_argument("--jobs", type=int, default=20_000, help="jobs per run (push, work)")
    r.add_argument("--repeat", type=int, default=2)
    r.add_argument("--backlog", type=int, default=1_000_000)
    r.add_argument("--dead", type=int, default=100_000)
    r.add_argument("--in-flight", type=int, default=50_000, help="inflight: jobs held active")
    r.add_argument("--churn", type=int, default=2_000_000, help="completed: 0 leaves churn out")
    r.add_argument(
        "--completed-rows",
        type=int,
        default=1_000_000,
        help="completed: completed jobs kept with their result beside the runs",
    )
    r.add_argument("--search-jobs", type=int, default=1_000_000, help="search: available jobs")
    r.add_argument("--search-rounds", type=int, default=5, help="search: timed calls per query")
    r.add_argument("--churn-first", type=int, default=100_000)
    r.add_argument("--latency-jobs", type=int, default=2000)
    r.add_argument("--latency-interval-ms", type=float, default=10.0)
    r.add_argument(
        "--fetch-url",
        help="latency: send the fetches to this server (another node on the same database) "
        "while pushes go to the main one",
    )
    r.add_argument("--idle-polls", type=int, default=1000)
    r.add_argument("--push-clients", type=int, nargs="+", default=[8, 32])
    r.add_argument(
        "--push-args",
        default="[]",
        help="push-single and push-batch: the args of each job, JSON in which each {n} is "
        'replaced by a job number (0..999), e.g. \'[{"order": "order-{n}", "customer": '
        '"acme {n}"}]\' for words the search indexes hold',
    )
    r.add_argument("--batch-sizes", type=int, nargs="+", default=[100, 1000])
    r.add_argument("--batch-clients", type=int, default=4)
    r.add_argument("--work-workers-1", type=int, default=32, help="0 leaves the variant out")
    # 32, as for push-single and work 1.
    r.add_argument("--work-workers-100", type=int, default=32, help="0 leaves the variant out")
    r.add_argument("--churn-producers", type=int, default=2)
    r.add_argument("--churn-workers", type=int, default=6)
    r.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes for a smoke run (< 2 minutes); results go to --out/quick",
    )
    r.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="before each measured run wait up to this many seconds for the machine "
        "to be idle (shared machines); 0 = do not wait",
    )
    r.add_argument(
        "--quiet-threshold",
        type=float,
        default=25.0,
        help="idle means at most this CPU %% busy (100 %% = one core)",
    )
    r.add_argument(
        "--nice",
        type=int,
        default=None,
        help="on a machine shared with other work: run the harness, its server and "
        "the local PostgreSQL cluster at this nice value (e.g. -10; needs root); "
        "PostgreSQL's previous values are restored at the end",
    )
    r.add_argument(
        "--sample-waits",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="sample what the server's database sessions wait on, every 20 ms of each run "
        "(pg_stat_activity; --no-sample-waits measures what the sampling costs)",
    )
    r.add_argument(
        "--peers",
        nargs="+",
        choices=peers_harness.NAMES,
        default=peers_harness.NAMES,
        help="peers: which of them (werk-py, werk-ts and werk-go are Werk's own clients)",
    )
    r.add_argument(
        "--setup-sql",
        help="SQL run on the database once it is migrated, before any scenario (to measure a "
        'schema change, e.g. "DROP INDEX werk_jobs_words_idx")',
    )
    r.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    r.add_argument("--note", default="", help="free text stored in the result file")
    sm = sub.add_parser("summary", help="Markdown table of result files (default: bench/results)")
    sm.add_argument("files", nargs="*")
    instructions.add_parser(sub)
    ab.add_parser(sub)
    return p


def _context(args: argparse.Namespace, target: Target) -> Context:
    quick = args.quick
    return Context(
        target=target,
        jobs=2000 if quick else args.jobs,
        repeat=args.repeat,
        backlog=20_000 if quick else args.backlog,
        dead=2000 if quick else args.dead,
        in_flight=2000 if quick else args.in_flight,
        churn=20_000 if quick else args.churn,
        completed_rows=20_000 if quick else args.completed_rows,
        search_jobs=20_000 if quick else args.search_jobs,
        search_rounds=args.search_rounds,
        churn_first=2000 if quick else min(args.churn_first, args.churn // 2),
        latency_jobs=100 if quick else args.latency_jobs,
        latency_interval=args.latency_interval_ms / 1e3,
        idle_polls=100 if quick else args.idle_polls,
        idle_settle=1.0 if quick else 3.0,
        idle_window=2.0 if quick else 10.0,
        push_clients=args.push_clients,
        push_args=args.push_args,
        batch_sizes=args.batch_sizes,
        batch_clients=args.batch_clients,
        work_workers_1=args.work_workers_1,
        work_workers_100=args.work_workers_100,
        churn_producers=args.churn_producers,
        churn_workers=args.churn_workers,
        quiet_wait=0.0 if quick else args.quiet_wait,
        quiet_threshold=args.quiet_threshold,
        sample_waits=args.sample_waits,
        fetch_url=args.fetch_url,
        churn_settle=2.0 if quick else 15.0,
        pool_max=sum(
            int(dict(kv.split("=", 1) for kv in args.server_env).get(name, default))
            for name, default in (("WERK_POOL_MAX_SIZE", 10), ("WERK_ADMIN_POOL_MAX_SIZE", 3))
        ),
    )


async def _run_one(args: argparse.Namespace, names: list[str], workers: int | None) -> None:
    if args.nice is not None:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # inherited by the server we start
    started_here = args.url is None
    if started_here:
        assert workers is not None
        db_url, db_desc = await resolve_database(args.database_url)
        env = dict(kv.split("=", 1) for kv in args.server_env)
        target = start_server(db_url, workers, REPO / "bench" / "logs", env)
    else:
        db_url, db_desc = args.database_url, "given" if args.database_url else "none"
        target = Target(
            url=args.url.rstrip("/"), database_url=db_url, pid=args.server_pid, workers=workers
        )
    ctx = _context(args, target)
    if args.setup_sql:
        if not db_url:
            raise SystemExit("--setup-sql needs the database (--database-url)")
        async with Db(db_url) as db:
            await db.c.execute(args.setup_sql)
    pg: dict[str, Any] = {}
    reniced: dict[int, int] = {}
    if db_url:
        async with Db(db_url) as db:
            pg = await db.settings()
            target.pg_uid = await db.backend_uid()
            with contextlib.suppress(Exception):
                data_dir = await db.c.fetchval("SHOW data_directory")
                pg["data_directory"] = data_dir
    if args.nice is not None:
        # the cluster's processes (the server's pool connections included, opened by now)
        reniced = procstat.renice(procstat.postgres_pids(target.pg_uid), args.nice)
        procstat.renice(target.server_pids(), args.nice)
        if pg.get("synchronous_commit") != "on":
            print(
                f"WARNING: synchronous_commit is {pg.get('synchronous_commit')}, not on: "
                "these are not durable-settings figures",
                flush=True,
            )
    out: dict[str, Any] = {
        "harness": "python -m bench " + " ".join(sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": args.note,
        "setup_sql": args.setup_sql,
        "git": report.git_state(),
        "machine": report.machine(),
        "versions": report.versions(),
        "postgres": pg,
        "database": db_desc,
        "server": {
            "url": target.url,
            "started_by_harness": started_here,
            "workers": workers,
            "env": args.server_env,
            "pool": "WERK_POOL_MIN_SIZE/MAX_SIZE defaults (2/10 per process) unless --server-env",
        },
        "nice": args.nice,
        "settings": {k: v for k, v in vars(ctx).items() if k not in ("target", "baselines")},
        "results": [],
    }
    if pg.get("data_directory") and os.path.isdir(os.path.dirname(pg["data_directory"])):
        out["fsync_probe_start"] = procstat.fsync_probe(os.path.dirname(pg["data_directory"]))
    out["cpu_probe_start"] = procstat.cpu_probe()
    print(
        f"# fsync probe (8 kB write + fdatasync, PostgreSQL's disk): "
        f"{out.get('fsync_probe_start')}\n"
        f"# cpu probe (1,000,000-iteration Python loop; higher = slower cores): "
        f"{out['cpu_probe_start']}",
        flush=True,
    )
    if pg.get("autovacuum") == "off":
        print(
            "WARNING: autovacuum is off on this PostgreSQL: werk_jobs is never vacuumed, so "
            "`churn` measures unbounded bloat (ALTER SYSTEM SET autovacuum = on; SELECT "
            "pg_reload_conf(); for production-like figures)",
            flush=True,
        )
    print(
        f"# werk bench  commit {out['git']['describe']}  server workers={workers}  "
        f"url={target.url}  db={db_desc}  synchronous_commit={pg.get('synchronous_commit')}  "
        f"pg {pg.get('server_version')}",
        flush=True,
    )
    runner = Runner(ctx, out, args.peers)
    folder = args.out / "quick" if args.quick else args.out
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = folder / f"{stamp}-w{workers or 'x'}-{out['git']['commit'][:8]}.json"

    def save() -> None:  # after every scenario, so a long run that is cut short keeps its part
        path.write_text(json.dumps(out, indent=1, default=str))

    try:
        for name in names:
            if name in NEEDS_DB and not ctx.has_db:
                print(f"{name:<12} skipped: needs --database-url", flush=True)
                continue
            await getattr(runner, name.replace("-", "_"))()
            save()
    finally:
        out["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if pg.get("data_directory") and os.path.isdir(os.path.dirname(pg["data_directory"])):
            out["fsync_probe_end"] = procstat.fsync_probe(os.path.dirname(pg["data_directory"]))
        out["cpu_probe_end"] = procstat.cpu_probe()
        save()
        print(
            f"# wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True
        )
        target.stop()
        procstat.restore(reniced)


def main() -> None:
    args = _parser().parse_args()
    if args.command == "summary":
        from bench.summary import main as summary

        summary(args.files)
        return
    if args.command == "instructions":
        instructions.main(args)
        return
    if args.command == "ab":
        ab.main(args)
        return
    names: list[str] = []
    for n in args.scenarios:
        if n == "all":
            names.extend(ORDER)
        elif n in ORDER or n == "explain":
            names.append(n)
        else:
            raise SystemExit(f"unknown scenario {n!r}; known: {', '.join(ORDER)}, explain, all")
    names = list(dict.fromkeys(names))
    names.sort(key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER) - 1.5)
    procstat.keep_freed_memory()
    try:
        import uvloop

        loop_factory: Any = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    for workers in args.server_workers if args.url is None else [None]:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(_run_one(args, names, workers))
