"""/metrics is valid Prometheus text (parsed by prometheus_client, a test-only dependency) with
the promised families, bounded labels, and counters that survive job deletion."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import InProcess
from tests.integration.admin.support import dead_job, fetch_one, push
from werk.services.metrics import RequestDurations


async def scrape(api: InProcess) -> dict[str, Any]:
    r = await api.http.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    return families


def value(families: dict[str, Any], name: str, **labels: str) -> float:
    for family in families.values():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                result: float = sample.value
                return result
    raise AssertionError(f"no sample {name}{labels}")


async def test_metrics_families_and_values(api: InProcess) -> None:
    for _ in range(3):
        await push(api, queue="mail")
    api.clock.advance(12)
    job = await fetch_one(api, "mail")
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204
    await dead_job(api, queue="video")
    await api.http.post("/v1/queues/video/pause")
    await api.http.post("/v1/beat", json={"wid": "w1"})

    m = await scrape(api)
    assert value(m, "werk_jobs_pushed_total", queue="mail") == 3
    assert value(m, "werk_jobs_processed_total", queue="mail") == 1
    assert value(m, "werk_jobs_failed_total", queue="video") == 1
    assert value(m, "werk_jobs", queue="mail", state="available") == 2
    assert value(m, "werk_jobs", queue="mail", state="active") == 0
    assert value(m, "werk_jobs", queue="video", state="dead") == 1
    assert value(m, "werk_queue_latency_seconds", queue="mail") == 12
    assert value(m, "werk_queue_paused", queue="video") == 1
    assert value(m, "werk_workers") == 1
    assert value(m, "werk_leases_expired_total") == 0
    assert m["werk_http_request_duration_seconds"].type == "histogram"
    assert (
        value(
            m, "werk_http_request_duration_seconds_count", route="/v1/jobs/{jid}/ack", method="POST"
        )
        == 1
    )

    # no per-job labels anywhere
    for family in m.values():
        for sample in family.samples:
            assert set(sample.labels) <= {
                "queue",
                "state",
                "kind",
                "method",
                "route",
                "status",
                "le",
            }
            assert job["jid"] not in str(sample.labels)


async def test_requests_are_timed_per_route_under_a_prefix_and_per_method_of_http(
    make_api: Callable[..., Any],
) -> None:
    """Behind a path prefix (WERK_ROOT_PATH) a request still counts under its route; a method
    HTTP does not define counts as "other", so clients cannot add series at will."""
    api: InProcess = await make_api(root_path="/werk")
    for path in ("/werk/v1/queues", "/v1/queues"):
        assert (await api.http.get(path)).status_code == 200
    for method in ("PROPFIND", "MKCALENDAR", "BREW"):
        assert (await api.http.request(method, "/v1/queues")).status_code == 405
    m = await scrape(api)
    count = "werk_http_request_duration_seconds_count"
    assert value(m, count, route="/v1/queues", method="GET", status="200") == 2
    assert value(m, count, route="/v1/queues", method="other", status="405") == 3
    samples = m["werk_http_request_duration_seconds"].samples
    assert {s.labels["method"] for s in samples} == {"GET", "other"}
    assert "(unmatched)" not in {s.labels["route"] for s in samples}


async def test_counters_survive_deletion_and_count_expired_leases(api: InProcess) -> None:
    await push(api, queue="q", reserve_for=60)
    await fetch_one(api, "q")
    api.clock.advance(61)
    await api.maintain()  # the lease expires: a failure, counted
    await api.http.post("/v1/jobs/delete", json={})
    m = await scrape(api)
    assert value(m, "werk_leases_expired_total") == 1
    assert value(m, "werk_jobs_failed_total", queue="q") == 1
    assert value(m, "werk_jobs_pushed_total", queue="q") == 1
    assert value(m, "werk_jobs", queue="q", state="scheduled") == 0


def test_request_durations_render_cumulative_buckets() -> None:
    """Each request lands in one bucket (a bound holds durations up to and including it); the
    rendered buckets count every request at or below their bound."""
    durations = RequestDurations(buckets=(0.005, 0.1, 1.0))
    for seconds in (0.001, 0.005, 0.05, 0.1000001, 7.0):
        durations.observe("POST", "/v1/fetch", 200, seconds)
    families = {f.name: f for f in text_string_to_metric_families("\n".join(durations.render()))}
    buckets = {
        s.labels["le"]: s.value
        for s in families["werk_http_request_duration_seconds"].samples
        if s.name.endswith("_bucket")
    }
    assert buckets == {"0.005": 2, "0.1": 3, "1": 4, "+Inf": 5}
    assert value(families, "werk_http_request_duration_seconds_count") == 5
    assert abs(value(families, "werk_http_request_duration_seconds_sum") - 7.1560001) < 1e-9
