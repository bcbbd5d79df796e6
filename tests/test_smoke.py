async def test_push_fetch_ack(api):
    r = await api.http.post("/v1/jobs", json={"jobtype": "t", "args": [1]})
    assert r.status_code == 201, r.text
    jid = r.json()["jid"]
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w", "count": 5})
    jobs = r.json()["jobs"]
    assert [j["jid"] for j in jobs] == [jid]
    r = await api.http.post(f"/v1/jobs/{jid}/ack", json={"lease": jobs[0]["lease"]})
    assert r.status_code == 204
    r = await api.http.get(f"/v1/jobs/{jid}")
    assert r.status_code == 404


def test_server_process(werk_server):
    import httpx

    r = httpx.post(werk_server.url + "/v1/jobs", json={"jobtype": "t"})
    assert r.status_code == 201
