"""``python -m bench ab``: two checkouts' servers compared under the same load, interleaved in
short slices.

The machine this project is measured on changes speed by half within seconds (bench/README.md).
Two runs of a scenario a minute or more apart, one per side, differ by how much of each fell in a
slow spell, and alternating whole runs evens that out only over many rounds. Here both servers
run the whole time, each on a fresh database of its own, and every scenario is cut into slices of
about half a second: each pair of slices runs the same load once against each side, the side that
goes first swapped from one pair to the next, so both meet the machine's changes alike. The
figure per scenario is the median over the pairs of new / old (for latency, old / new: above 1
is faster either way).

Each side runs its own checkout's ``werk`` (``<checkout>/.venv/bin/werk``, as ``python dev.py
setup`` installs it); the load comes from this checkout's lean client (bench/scenarios.py). The
two databases (``werk_ab_old``, ``werk_ab_new``) are dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import report, scenarios
from bench.scenarios import Context
from bench.target import (
    DEFAULT_PG,
    REPO,
    Db,
    Target,
    drop_databases,
    fresh_database,
    start_server,
)

Slice = Callable[[Context], Awaitable[dict[str, Any]]]

# Per scenario: the load of one slice (about half a second here), and its jobs per slice.
SLICES: dict[str, tuple[Slice, int]] = {
    "push-single clients=8": (lambda ctx: scenarios.push_single(ctx, 8), 2_000),
    "push-single clients=32": (lambda ctx: scenarios.push_single(ctx, 32), 3_000),
    "push-batch batch=100": (lambda ctx: scenarios.push_batch(ctx, 100, 4), 20_000),
    "push-batch batch=1000": (lambda ctx: scenarios.push_batch(ctx, 1000, 4), 36_000),
    "push-batch batch=1000 minimal": (
        lambda ctx: scenarios.push_batch(ctx, 1000, 4, minimal=True),
        40_000,
    ),
    "work count=1 single-ack": (lambda ctx: scenarios.work(ctx, 1, 32), 2_000),
    "work count=100 batch-ack": (lambda ctx: scenarios.work(ctx, 100, 32), 20_000),
    "latency": (lambda ctx: scenarios.latency(ctx), 50),
}
GROUPS = {
    "push-single": [n for n in SLICES if n.startswith("push-single")],
    "push-batch": [n for n in SLICES if n.startswith("push-batch")],
    "work": [n for n in SLICES if n.startswith("work")],
    "latency": ["latency"],
}
SIDES = ("old", "new")
CPU = ("server", "postgres")


def _figure(name: str, result: dict[str, Any]) -> float:
    """Jobs/s, or for latency the median delay (ms) from push to the fetch's answer."""
    return float(result["p50_ms"] if name == "latency" else result["rate"])


def _cpu_per_job(result: dict[str, Any]) -> dict[str, float]:
    """The server's and PostgreSQL's CPU µs per job of one slice."""
    if "cpu_us_per_job" in result:
        return {k: result["cpu_us_per_job"][k] for k in CPU}
    # The latency scenario reports its meter's CPU seconds, not per job: divide by its jobs.
    jobs = max(result["jobs"], 1)
    return {k: round(1e6 * result["cpu"][k] / jobs, 1) for k in CPU}


def _ratio(name: str, old: float, new: float) -> float:
    """new against old, above 1 when new is faster."""
    return old / new if name == "latency" else new / old


async def compare(name: str, contexts: dict[str, Context], pairs: int, jobs: int) -> dict[str, Any]:
    """``pairs`` pairs of slices of scenario ``name``; the tables are emptied before each pair,
    so every slice starts from the same table on either side."""
    load, _ = SLICES[name]
    figures: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    ratios = []
    orders = []
    for pair in range(pairs):
        order = SIDES if pair % 2 == 0 else SIDES[::-1]
        orders.append(list(order))
        for side in SIDES:
            await scenarios.reset(contexts[side])
        for side in order:
            result = await load(replace(contexts[side], jobs=jobs, latency_jobs=jobs))
            figures[side].append(_figure(name, result))
            cpu[side].append(_cpu_per_job(result))
        ratios.append(_ratio(name, figures["old"][-1], figures["new"][-1]))
    return {
        "name": name,
        "unit": "ms" if name == "latency" else "jobs/s",
        "jobs_per_slice": jobs,
        "pairs": pairs,
        "old": figures["old"],
        "new": figures["new"],
        "cpu_us_per_job": cpu,
        "order": orders,
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "mean_ratio": statistics.fmean(ratios),
    }


def _line(r: dict[str, Any]) -> str:
    old, new = statistics.median(r["old"]), statistics.median(r["new"])
    unit = "ms p50" if r["unit"] == "ms" else "jobs/s"
    fmt = "{:,.2f}" if r["unit"] == "ms" else "{:,.0f}"
    ratios = sorted(r["ratios"])
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    cpu = {
        side: {k: statistics.median(c[k] for c in r["cpu_us_per_job"][side]) for k in CPU}
        for side in SIDES
    }
    costs = "  ".join(f"{k} {cpu['old'][k]:.1f} -> {cpu['new'][k]:.1f}" for k in CPU)
    return (
        f"{r['name']:<30} pairs={r['pairs']:<3} old {fmt.format(old)} new {fmt.format(new)} "
        f"{unit} (medians)  new/old median {r['median_ratio']:.3f}  mean {r['mean_ratio']:.3f}  "
        f"quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}  | cpu us/job {costs}"
    )


async def _run(args: argparse.Namespace) -> None:
    known = {**GROUPS, **{n: [n] for n in SLICES}}
    if unknown := [n for n in args.scenarios if n not in known]:
        raise SystemExit(f"unknown scenarios {unknown}; known: {', '.join(known)}")
    names = [row for n in args.scenarios for row in known[n]]
    checkouts = {"old": args.old.resolve(), "new": (args.new or REPO).resolve()}
    targets: dict[str, Target] = {}
    try:
        for side, checkout in checkouts.items():
            werk = checkout / ".venv" / "bin" / "werk"
            if not werk.exists():
                raise SystemExit(f"bench ab: no {werk} (run `python dev.py setup` there)")
            database = await fresh_database(args.database_url, f"werk_ab_{side}")
            targets[side] = start_server(database, 1, REPO / "bench" / "logs", {}, werk=str(werk))
        async with Db(args.database_url) as db:
            pg_uid = await db.backend_uid()
        for t in targets.values():
            t.pg_uid = pg_uid
        contexts = {side: Context.bare(t, 0) for side, t in targets.items()}
        out: dict[str, Any] = {
            "harness": "python -m bench ab",
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git": {side: report.git_state(path) for side, path in checkouts.items()},
            "results": [],
        }
        for side, path in checkouts.items():
            print(f"# {side}: {path} at {out['git'][side]['commit'][:12]}", flush=True)
        for name in names:
            jobs = max(1, round(SLICES[name][1] * args.scale))
            result = await compare(name, contexts, args.pairs, jobs)
            out["results"].append(result)
            print(_line(result), flush=True)
        out["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        path = args.out / f"{stamp}-ab.json"
        path.write_text(json.dumps(out, indent=1))
        print(f"# wrote {path}", flush=True)
    finally:
        for t in targets.values():
            t.stop()
        await drop_databases(args.database_url, [f"werk_ab_{side}" for side in targets])


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ab", help="two checkouts' servers side by side, the same load interleaved in slices"
    )
    p.add_argument("scenarios", nargs="+", help=f"any of {', '.join(GROUPS)}, or a row's name")
    p.add_argument("--old", type=Path, required=True, help="the checkout to compare against")
    p.add_argument("--new", type=Path, help="the checkout under test (default: this one)")
    p.add_argument("--pairs", type=int, default=30, help="pairs of slices per scenario")
    p.add_argument(
        "--scale", type=float, default=1.0, help="jobs per slice, times the defaults (~0.5 s)"
    )
    p.add_argument(
        "--database-url", default=DEFAULT_PG, help="the PostgreSQL server for both databases"
    )
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ab")


def main(args: argparse.Namespace) -> None:
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        runner.run(_run(args))
