"""The msgspec decoders of werk.api.fast_bodies must never take a body that their model in
werk.api.schemas refuses, and must read what they take as the model does. Compared on generated
bodies: valid ones, near misses (lengths and numbers at their bounds, NUL, lone surrogates, extra
or missing keys, wrong types, JSON that jsonb cannot hold) and arbitrary JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from tests.conftest import InProcess
from werk.api import fast_bodies, schemas
from werk.domain import job as rules

_ACKS: TypeAdapter[schemas.AckBatch] = TypeAdapter(schemas.AckBatch)
_JOBS: TypeAdapter[schemas.JobBatchPush] = TypeAdapter(schemas.JobBatchPush)


def _acks_by_model(body: bytes) -> Any:
    try:
        return _ACKS.validate_json(body).pairs()
    except ValidationError:
        return None


def _jobs_by_model(body: bytes) -> Any:
    try:
        return _JOBS.validate_json(body).specs()
    except ValidationError:
        return None


def _acks_by_fast(body: bytes) -> Any:
    batch = fast_bodies.ack_batch(body)
    return None if batch is None else batch.pairs()


def _jobs_by_fast(body: bytes) -> Any:
    batch = fast_bodies.job_batch_push(body)
    return None if batch is None else batch.specs()


_KINDS: dict[str, tuple[Callable[[bytes], Any], Callable[[bytes], Any]]] = {
    "acks": (_acks_by_fast, _acks_by_model),
    "jobs": (_jobs_by_fast, _jobs_by_model),
}


def _agree(kind: str, body: Any) -> bool:
    """Compares the two on ``body`` (bytes, or JSON-able: then sent both ASCII-escaped and
    not); True when the fast decoder took it (so the comparison said something)."""
    fast, model = _KINDS[kind]
    bodies = (
        [body]
        if isinstance(body, bytes)
        else [json.dumps(body).encode(), json.dumps(body, ensure_ascii=False).encode()]
    )
    took = False
    for raw in bodies:
        read = fast(raw)
        if read is not None:
            assert read == model(raw), raw
            took = True
    return took


_text = st.text(
    st.characters(codec="utf-8") | st.sampled_from(["\x00", "é", "😀", "\n", '"']),
    max_size=rules.JID_MAX_LENGTH + 3,
)
_edge_text = st.sampled_from(
    [
        "",
        "a" * (rules.JID_MIN_LENGTH - 1),
        "a" * rules.JID_MIN_LENGTH,
        "é" * rules.JID_MAX_LENGTH,
        "é" * (rules.JID_MAX_LENGTH + 1),
        "x" * 100,
        "x" * 101,
        "x" * rules.JOBTYPE_MAX_LENGTH,
        "x" * (rules.JOBTYPE_MAX_LENGTH + 1),
        "job-0000\x00",
        "job-000000001",
        "default",
        "q.a-b_c",
        "q a",
        "q\n",
        "2026-12-03T00:00:00Z",
    ]
)
_edge_int = st.sampled_from(
    [
        -(2**63) - 1,
        -(2**63),
        -1001,
        -1000,
        -2,
        -1,
        0,
        1,
        59,
        60,
        1000,
        1001,
        86_400,
        86_401,
        2**63 - 1,
        2**63,
    ]
)
_scalar: st.SearchStrategy[Any] = (
    _text
    | _edge_text
    | st.integers()
    | _edge_int
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1.0, 0.0, -0.0, 1e300, 5e-324])
    | st.none()
    | st.booleans()
)
_json: st.SearchStrategy[Any] = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


_JOB_KEYS = [
    "jid",
    "jobtype",
    "args",
    "queue",
    "priority",
    "reserve_for",
    "retry",
    "backtrace",
    "custom",
    "at",
]
_job = st.dictionaries(
    st.sampled_from(_JOB_KEYS) | st.text(max_size=3), _scalar | _json, max_size=6
) | st.fixed_dictionaries(
    {"jobtype": _text | _edge_text},
    optional={
        "jid": _text | _edge_text | st.none(),
        "args": st.lists(_json, max_size=3) | _scalar,
        "queue": _edge_text | _text,
        "priority": _edge_int | _scalar,
        "reserve_for": _edge_int,
        "retry": _edge_int,
        "backtrace": _edge_int,
        "custom": st.dictionaries(_text, _json, max_size=3) | _scalar,
    },
)
_ack = st.dictionaries(
    st.sampled_from(["jid", "lease"]) | st.text(max_size=3), _scalar, max_size=3
) | st.fixed_dictionaries({"jid": _text | _edge_text, "lease": _text | _edge_text})


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["acks"]) | st.text(max_size=3),
        st.lists(_ack, max_size=4) | _json,
        max_size=2,
    )
)
def test_ack_decoder_takes_nothing_the_model_refuses(body: Any) -> None:
    _agree("acks", body)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ack, min_size=1, max_size=5))
def test_ack_batches_read_the_same(acks: list[Any]) -> None:
    _agree("acks", {"acks": acks})


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["jobs"]) | st.text(max_size=3),
        st.lists(_job, max_size=3) | _json,
        max_size=2,
    )
)
def test_push_decoder_takes_nothing_the_model_refuses(body: Any) -> None:
    _agree("jobs", body)


@settings(max_examples=600, deadline=None)
@given(st.lists(_job, min_size=1, max_size=4))
def test_push_batches_read_the_same(jobs: list[Any]) -> None:
    _agree("jobs", {"jobs": jobs})


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("acks", b'{"acks":[{"jid":"job-000000001","lease":"l"}]}'),
        ("acks", b' {"acks" : [ {"lease":"l", "jid":"job-000000001"} ] } '),
        ("acks", b'{"acks":[{"jid":"job-00000000\\u00e9","lease":"l"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"noop","args":[],"queue":"bench"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a"},{"jobtype":"b","jid":null,"custom":{"k":[1]}}]}'),
        (
            "jobs",
            orjson.dumps(
                {
                    "jobs": [
                        {
                            "jid": "job-000000001",
                            "jobtype": "SendEmail",
                            "args": [1, 2.5, "x", None, True, {"a": [{}]}, -(2**63)],
                            "queue": "mail.high",
                            "priority": -1000,
                            "reserve_for": 60,
                            "retry": -1,
                            "backtrace": 1000,
                            "custom": {"trace": "abc"},
                        }
                    ]
                }
            ),
        ),
        ("jobs", b'{"jobs":[{"jobtype":"a","args":[{"k":1,"k":2}]}]}'),  # the last one wins
        ("jobs", orjson.dumps({"jobs": [{"jobtype": "a", "args": _nested(63)}]})),
    ],
)
def test_plain_batches_take_the_fast_path(kind: str, body: bytes) -> None:
    assert _agree(kind, body)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("acks", b'{"acks":[]}'),
        ("acks", b'{"acks":[{"jid":"job-000000001","lease":"l","x":1}]}'),
        ("acks", b'{"acks":[{"jid":"job-000000001","lease":"l"}],"x":1}'),
        ("acks", b'{"acks":[{"jid":"job-00000000\\u0000","lease":"l"}]}'),
        ("acks", b'{"acks":[{"jid":"job-00000000\\ud800","lease":"l"}]}'),
        ("acks", b'{"acks":[{"jid":"short","lease":"l"}]}'),
        ("acks", b'{"acks":[{"jid":"job-000000001","lease":""}]}'),
        ("acks", orjson.dumps({"acks": [{"jid": "é" * 101, "lease": "l"}]})),
        ("acks", orjson.dumps({"acks": [{"jid": "job-000000001", "lease": "é" * 101}]})),
        ("acks", b'{"acks":[{"jid":"job-000000001"}]}'),
        ("acks", b'{"acks":[{"jid":1234567890,"lease":"l"}]}'),
        ("acks", b'{"acks":{"jid":"job-000000001","lease":"l"}}'),
        ("acks", b'{"acks":[{"jid":"job-000000001","lease":"l"}]'),
        ("acks", b'{"acks":[{"jid":"job-000000001","lease":"l"}]}\xff'),
        ("acks", b""),
        ("jobs", b'{"jobs":[]}'),
        ("jobs", b'{"jobs":[{}]}'),
        ("jobs", b'{"jobs":[{"jobtype":""}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a\\u0000"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a\\udc00"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","jid":"job-0000\\u0000"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","queue":"q a"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","queue":"q\\n"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","priority":1001}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","priority":1.5}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","priority":true}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","reserve_for":59}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","retry":-2}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","args":{}}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","custom":[]}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","args":["\\u0000"]}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","custom":{"\\u0000":1}}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","args":[9223372036854775808]}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","args":[1e400]}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","args":[NaN]}]}'),
        ("jobs", orjson.dumps({"jobs": [{"jobtype": "a", "args": _nested(64)}]})),
        ("jobs", b'{"jobs":[{"jobtype":"a\xff"}]}'),  # not UTF-8
        ("jobs", b'{"jobs":[{"jobtype":"a\xed\xa0\x80"}]}'),  # a surrogate encoded as UTF-8
        ("jobs", b'{"jobs":[{"jobtype":"a","args":["\xed\xa0\x80"]}]}'),
        ("acks", b'{"acks":[{"jid":"job-0000\xc3","lease":"l"}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a","x":1}]}'),
        ("jobs", b'{"jobs":[{"jobtype":"a"}],"x":1}'),
    ],
)
def test_what_the_model_refuses_goes_to_the_model(kind: str, body: bytes) -> None:
    fast, model = _KINDS[kind]
    assert fast(body) is None
    assert model(body) is None


def test_an_integer_written_with_a_fraction_goes_to_the_model_which_takes_it() -> None:
    """JSON Schema (and FWP) count 1.0 as an integer; msgspec does not, so the model decides."""
    body = b'{"jobs":[{"jobtype":"a","priority":1.0}]}'
    assert _jobs_by_fast(body) is None
    assert _jobs_by_model(body)[0].priority == 1


def test_a_job_with_a_time_goes_to_the_model() -> None:
    body = b'{"jobs":[{"jobtype":"a","at":"2030-01-01T00:00:00Z"}]}'
    assert _jobs_by_fast(body) is None
    assert _jobs_by_model(body)[0].at is not None


_BASE_JOB = {"jid": "job-000000001", "jobtype": "noop", "args": [1], "queue": "q", "custom": {}}
_FIELD_VALUES = [
    *(("jid", v) for v in [None, 1, "", "a" * 7, "a" * 8, "é" * 100, "é" * 101, "a\x00bcdefghi"]),
    *(("jobtype", v) for v in ["", "a", "x" * 200, "x" * 201, "a\x00", "\n", 1, None]),
    *(("queue", v) for v in ["", "q\n", "\nq", "q a", "é", "x" * 100, "x" * 101, "a.b-c_D9", None]),
    *(
        (key, v)
        for key in ("priority", "reserve_for", "retry", "backtrace")
        for v in [-1001, -1000, -2, -1, 0, 59, 60, 1000, 1001, 86_400, 86_401, 1.0, True, "1"]
    ),
    *(("args", v) for v in [[], {}, None, "[]", [None], [2**63], [-(2**63) - 1], [1e308]]),
    *(("custom", v) for v in [{}, [], None, {"a": "\x00"}, {"\x00": 1}, {"a": {"b": [2**64]}}]),
    ("at", None),
    ("extra", 1),
]


@pytest.mark.parametrize(("key", "value"), _FIELD_VALUES)
def test_one_field_at_its_edges(key: str, value: Any) -> None:
    _agree("jobs", {"jobs": [{**_BASE_JOB, key: value}]})


async def test_the_server_reads_plain_batches_without_the_models(
    api: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    validated: list[Any] = []
    real = TypeAdapter.validate_json

    def spy(self: TypeAdapter[Any], data: Any, /, **kwargs: Any) -> Any:
        validated.append(self._type)
        return real(self, data, **kwargs)

    monkeypatch.setattr(TypeAdapter, "validate_json", spy)
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "a", "queue": "fb"}] * 3})
    assert r.status_code == 201 and r.json()["created"] == 3
    r = await api.http.post("/v1/fetch", json={"queues": ["fb"], "wid": "w", "count": 3})
    jobs = r.json()["jobs"]
    r = await api.http.post(
        "/v1/ack", json={"acks": [{"jid": j["jid"], "lease": j["lease"]} for j in jobs]}
    )
    assert r.json() == {"acked": [j["jid"] for j in jobs], "lease_lost": []}
    assert schemas.JobBatchPush not in validated and schemas.AckBatch not in validated
    # A job with a time is read by the model, on the same path.
    r = await api.http.post(
        "/v1/jobs/batch", json={"jobs": [{"jobtype": "a", "at": "2030-01-01T00:00:00Z"}]}
    )
    assert r.status_code == 201 and r.json()["jobs"][0]["state"] == "scheduled"
    assert schemas.JobBatchPush in validated


@pytest.mark.parametrize("key", sorted(set(_JOB_KEYS) - {"jobtype"}))
def test_null_means_not_given_and_goes_to_the_model(key: str) -> None:
    """Null on an optional key (a generated client's "not given") is read as its absence; the
    fast decoder takes it only for ``jid`` (its own default is None), else the model reads it."""
    body = orjson.dumps({"jobs": [{**_BASE_JOB, key: None}]})
    without = {k: v for k, v in _BASE_JOB.items() if k != key}
    assert _jobs_by_model(body) == _jobs_by_model(orjson.dumps({"jobs": [without]}))
    assert (_jobs_by_fast(body) is not None) == (key == "jid")
    _agree("jobs", {"jobs": [{**_BASE_JOB, key: None}]})
