"""Real concurrency: two server processes, many clients, every job delivered exactly once."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import httpx

from tests.support.helpers import count_jobs

JOBS = 5000
FETCHERS = 24


async def test_two_servers_many_fetchers_deliver_each_job_once(werk_server_factory, database_url):
    servers = [werk_server_factory(), werk_server_factory()]
    deliveries: Counter[str] = Counter()
    done = asyncio.Event()

    async def produce(http: httpx.AsyncClient, start: int) -> None:
        # Half the jobs in batches, half one by one, spread over both servers.
        for i in range(start, start + JOBS // 4, 250):
            batch = [{"jobtype": "n", "jid": f"job-{n:06d}"} for n in range(i, i + 250)]
            r = await http.post(servers[i % 2].url + "/v1/jobs/batch", json={"jobs": batch})
            assert r.status_code == 201, r.text

    async def produce_singles(http: httpx.AsyncClient, start: int, step: int) -> None:
        for n in range(start, JOBS, step):
            r = await http.post(
                servers[n % 2].url + "/v1/jobs", json={"jobtype": "n", "jid": f"job-{n:06d}"}
            )
            assert r.status_code == 201, r.text

    async def consume(http: httpx.AsyncClient, k: int) -> None:
        server = servers[k % 2]
        while not done.is_set():
            r = await http.post(
                server.url + "/v1/fetch",
                json={
                    "queues": ["default"],
                    "wid": f"worker-{k}",
                    "count": random.randint(1, 10),
                    "wait": 0.5,
                },
            )
            assert r.status_code == 200, r.text
            jobs = r.json()["jobs"]
            for job in jobs:
                deliveries[job["jid"]] += 1
            if not jobs:
                continue
            if k % 2:
                acks = [{"jid": j["jid"], "lease": j["lease"]} for j in jobs]
                r = await http.post(server.url + "/v1/ack", json={"acks": acks})
                assert r.json()["lease_lost"] == []
            else:
                for job in jobs:
                    r = await http.post(
                        f"{server.url}/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]}
                    )
                    assert r.status_code == 204, r.text
            if sum(deliveries.values()) >= JOBS:
                done.set()

    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        consumers = [asyncio.create_task(consume(http, k)) for k in range(FETCHERS)]
        await asyncio.gather(
            produce(http, 0),
            produce(http, JOBS // 4),
            *(produce_singles(http, JOBS // 2 + s, 8) for s in range(8)),
        )
        await asyncio.wait_for(asyncio.gather(*consumers), timeout=240)
        info = (await http.get(servers[0].url + "/v1/info")).json()

    assert len(deliveries) == JOBS
    assert set(deliveries.values()) == {1}, [j for j, n in deliveries.items() if n > 1][:5]
    assert await count_jobs(database_url) == 0
    assert info["totals"] == {"processed": JOBS, "failed": 0, "enqueued": JOBS}
