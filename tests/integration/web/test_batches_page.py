"""The dashboard's Batches pages: the list (progress, callbacks' states) linked from the nav,
one batch with its parent and children, a member job linking to its batch, and escaping."""

from __future__ import annotations

from tests.conftest import InProcess

XSS = "<script>alert('pwned')</script>"


async def test_batches_pages_show_progress_and_callbacks(api: InProcess) -> None:
    r = await api.http.post(
        "/v1/batches", json={"description": XSS, "on_success": {"jobtype": "done"}}
    )
    parent = r.json()["bid"]
    r = await api.http.post("/v1/batches", json={"parent": parent, "on_death": {"jobtype": "x"}})
    child = r.json()["bid"]
    r = await api.http.post("/v1/jobs", json={"jobtype": "t", "batch": parent})
    member = r.json()["jid"]

    r = await api.http.get("/")
    assert 'href="/batches"' in r.text
    r = await api.http.get("/batches")
    assert r.status_code == 200, r.text
    assert parent in r.text and child in r.text
    assert "<progress" in r.text and "0 succeeded · 0 dead · 2 pending of 2" in r.text
    assert "waiting" in r.text
    assert XSS not in r.text and "&lt;script&gt;" in r.text
    r = await api.http.get(f"/batches/{parent}")
    assert r.status_code == 200 and child in r.text and "every member completed" in r.text
    assert f'href="/jobs/{member}"' in r.text  # its member jobs
    # A callback's page links its dependency to the batch it waits for.
    callback = (await api.http.get(f"/v1/batches/{parent}")).json()["on_success"]["jid"]
    r = await api.http.get(f"/jobs/{callback}")
    assert f'href="/batches/{parent}"' in r.text
    r = await api.http.get(f"/batches/{child}")
    assert f'href="/batches/{parent}"' in r.text and "the first member died" in r.text
    r = await api.http.get(f"/jobs/{member}")
    assert f'href="/batches/{parent}"' in r.text
    r = await api.http.get("/batches/b-nosuchbatch")
    assert r.status_code == 404 and "No such batch" in r.text
    r = await api.http.post(f"/v1/batches/{child}/commit")
    r = await api.http.get("/batches?unfinished=true")
    assert parent in r.text and child not in r.text
