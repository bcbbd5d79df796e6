"""FWP commands -> service calls -> replies. One Session per connection; nothing here touches
SQL or decides what happens to a job: the services do."""

from __future__ import annotations

import asyncio
import logging
import re
import resource
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from werk import __version__
from werk.config import Settings
from werk.domain.batches import BID_MAX_LENGTH, DESCRIPTION_MAX_LENGTH
from werk.domain.bodies import JobPush
from werk.domain.job import OnConflict
from werk.domain.json_values import check_json, check_text
from werk.errors import DatabaseUnavailable, InvalidRequest, JobNotFound, WerkError
from werk.faktory import protocol
from werk.faktory.jobs import (
    BACKTRACE_MAX,
    ERRTYPE_MAX,
    MESSAGE_MAX,
    InvalidJob,
    callback_spec,
    faktory_batch,
    faktory_job,
    job_spec,
)
from werk.faktory.protocol import OK, Command, PasswordRejected, ProtocolError
from werk.services.container import Services
from werk.services.faktory_ops import FaktoryOps, MutateFilter

log = logging.getLogger(__name__)

FAKTORY_VERSION = "1.10.0"
MAX_FETCH_QUEUES = 100
WID_MAX = 100
LINE_MAX = 10_000  # one backtrace line


@dataclass(slots=True)
class Stats:
    """Counters shown by INFO's ``server`` section."""

    started: float = field(default_factory=time.monotonic)
    connections: int = 0
    command_count: int = 0


@dataclass(slots=True)
class Session:
    """One connection after its HELLO."""

    wid: str | None = None  # a worker process; None for a producer connection
    hostname: str = ""
    pid: int | None = None
    labels: list[str] = field(default_factory=list)
    # The worker a FETCH reserves for. A producer connection that fetches gets a wid of its own,
    # so only this connection can settle what it fetched.
    generated_wid: str = field(default_factory=lambda: "fwp-" + secrets.token_hex(8))
    # Whether the client has closed its side (set by the server to its reader's EOF check).
    peer_gone: Callable[[], bool] = lambda: False

    @property
    def fetch_wid(self) -> str:
        return self.wid or self.generated_wid


class Commands:
    def __init__(
        self,
        settings: Settings,
        services: Services,
        ops: FaktoryOps,
        stats: Stats,
        known_worker: Callable[[str], bool],
        unavailable: tuple[type[Exception], ...],
    ) -> None:
        self._settings = settings
        self._services = services
        self._ops = ops
        self._stats = stats
        self._known_worker = known_worker
        self._unavailable = unavailable
        self._handlers: dict[str, Callable[[Session, str], Awaitable[bytes]]] = {
            "PUSH": self._push,
            "PUSHB": self._pushb,
            "FETCH": self._fetch,
            "ACK": self._ack,
            "FAIL": self._fail,
            "BEAT": self._beat,
            "INFO": self._info,
            "FLUSH": self._flush,
            "QUEUE": self._queue,
            "MUTATE": self._mutate,
            "BATCH": self._batch,
        }

    # -- the handshake ---------------------------------------------------------------------------

    async def hello(self, command: Command, challenge: protocol.Challenge) -> Session:
        """Checks HELLO (and the password) and registers a worker. ProtocolError closes."""
        if command.verb != "HELLO":
            raise ProtocolError("the handshake comes first: send HELLO", close=True)
        try:
            hello = protocol.load_json(command.payload, "HELLO")
        except ProtocolError as exc:
            raise ProtocolError(exc.message, close=True) from None
        if not isinstance(hello, dict):
            raise ProtocolError("HELLO needs a JSON object", close=True)
        if challenge.salt is not None:
            password = self._settings.faktory_password or ""
            pwdhash = hello.get("pwdhash")
            # Clients that do not announce protocol 2 (the Python client) hash once.
            version = hello.get("v")
            v2 = isinstance(version, int) and not isinstance(version, bool) and version >= 2
            iterations = challenge.iterations if v2 else 1
            if not isinstance(pwdhash, str) or not protocol.hash_matches(
                pwdhash, password, challenge.salt, iterations
            ):
                raise PasswordRejected()
        session = Session(
            hostname=_text(hello.get("hostname"), 255),
            pid=_pid(hello.get("pid")),
            labels=[_text(x, 100) for x in hello.get("labels") or [] if isinstance(x, str)][:50]
            if isinstance(hello.get("labels"), list)
            else [],
        )
        wid = hello.get("wid")
        if wid is not None and wid != "":
            if not isinstance(wid, str) or len(wid) > WID_MAX or _text(wid, WID_MAX) != wid:
                raise ProtocolError(f"wid must be a string of 1-{WID_MAX} characters", close=True)
            session.wid = wid
            try:
                await self._services.workers.beat(
                    wid, hostname=session.hostname, pid=session.pid, labels=session.labels
                )
            except Exception as exc:
                if not isinstance(exc, self._unavailable):
                    raise
                log.warning("FWP HELLO failed, the database is unavailable: %s", exc)
                raise ProtocolError("the database is unavailable; try again", close=True) from None
        return session

    # -- dispatch --------------------------------------------------------------------------------

    async def run(self, session: Session, command: Command) -> bytes:
        """One reply for one command. Failures become ``-ERR`` replies; only a ProtocolError
        with ``close`` set ends the connection."""
        self._stats.command_count += 1
        handler = self._handlers.get(command.verb)
        if handler is None:
            if command.verb == "HELLO":
                return protocol.error("HELLO was already received on this connection")
            return protocol.error(f"unknown command {command.verb[:50]}")
        try:
            return await handler(session, command.payload)
        except ProtocolError:
            raise
        except InvalidJob as exc:
            return protocol.error(str(exc))
        except WerkError as exc:
            if isinstance(exc, DatabaseUnavailable):
                log.warning("FWP %s: %s", command.verb, exc.detail)
            return protocol.error(exc.detail)
        except Exception as exc:
            if isinstance(exc, self._unavailable):
                log.warning("FWP %s failed, the database is unavailable: %s", command.verb, exc)
                return protocol.error("the database is unavailable; try again")
            log.exception("FWP %s failed", command.verb)
            return protocol.error("internal error (see the server log)")

    # -- producers -------------------------------------------------------------------------------

    async def _push(self, session: Session, payload: str) -> bytes:
        spec = job_spec(protocol.load_json(payload, "PUSH"))
        (result,) = await self._services.push.push([spec])
        if result.conflict is OnConflict.REJECT:
            return protocol.error(_not_unique(result.job["jid"]), "NOTUNIQUE")
        return OK

    async def _pushb(self, session: Session, payload: str) -> bytes:
        raw = protocol.load_json(payload, "PUSHB")
        if not isinstance(raw, list):
            raise InvalidJob("PUSHB needs a JSON array of jobs")
        if len(raw) > self._settings.max_batch:
            raise InvalidJob(f"PUSHB takes at most {self._settings.max_batch} jobs")
        rejected: dict[str, str] = {}
        specs: list[JobPush] = []
        seen: set[str] = set()
        for i, item in enumerate(raw):
            jid = item.get("jid") if isinstance(item, dict) else None
            key = jid if isinstance(jid, str) and jid else str(i)
            try:
                spec = job_spec(item)
            except InvalidJob as exc:
                rejected[key] = str(exc)
                continue
            if spec.jid in seen:
                rejected[key] = "the jid appears twice in the batch"
                continue
            seen.add(spec.jid or key)
            specs.append(spec)
        if specs:
            results = await self._services.push.push(specs)
            for spec, result in zip(specs, results, strict=True):
                if result.conflict is OnConflict.REJECT:
                    rejected[spec.jid or ""] = f"NOTUNIQUE {_not_unique(result.job['jid'])}"
        return protocol.bulk(protocol.dump_json(rejected))

    # -- batches (Faktory Enterprise) ------------------------------------------------------------

    async def _batch(self, session: Session, payload: str) -> bytes:
        """BATCH NEW {description, parent_bid, success, complete} answers the new bid; BATCH
        OPEN, COMMIT and STATUS name one."""
        sub, _, rest = payload.strip().partition(" ")
        sub, rest = sub.upper(), rest.strip()
        if sub == "NEW":
            return await self._batch_new(rest)
        if sub not in ("OPEN", "COMMIT", "STATUS"):
            return protocol.error(f"unknown BATCH command {sub[:20]}")
        if not rest or len(rest) > BID_MAX_LENGTH or " " in rest:
            raise InvalidRequest(f"BATCH {sub} needs a bid")
        batches = self._services.batches
        if sub == "OPEN":  # answered with the bid, which Faktory's clients take as the batch's
            await batches.open(rest)
            return protocol.bulk(rest.encode())
        if sub == "COMMIT":
            await batches.commit(rest)
            return OK
        return protocol.bulk(protocol.dump_json(faktory_batch(await batches.get(rest))))

    async def _batch_new(self, payload: str) -> bytes:
        raw = protocol.load_json(payload, "BATCH NEW")
        if not isinstance(raw, dict):
            raise InvalidJob("BATCH NEW needs a JSON object")
        description = raw.get("description")
        if description is not None:
            description = _text(description, DESCRIPTION_MAX_LENGTH)
        parent = raw.get("parent_bid") or None
        if parent is not None and not isinstance(parent, str):
            raise InvalidJob("parent_bid must be a string")
        callbacks = {
            kind: callback_spec(raw[key])
            for kind, key in (("success", "success"), ("complete", "complete"))
            if raw.get(key)
        }
        row = await self._services.batches.new(description, parent, callbacks)
        return protocol.bulk(row["bid"].encode())

    # -- workers ---------------------------------------------------------------------------------

    async def _fetch(self, session: Session, payload: str) -> bytes:
        queues = payload.split()
        if not queues:
            raise InvalidJob("FETCH needs at least one queue")
        queues = list(dict.fromkeys(queues))[:MAX_FETCH_QUEUES]
        wait = self._settings.faktory_fetch_wait
        started = time.monotonic()
        try:
            rows = await self._services.claim.fetch(queues, session.fetch_wid, 1, wait)
        except Exception as exc:
            # Workers treat a FETCH error as fatal (the Python worker dies): answer "no job"
            # and let them ask again.
            log.warning("FWP FETCH failed (answered with no job): %s", exc)
            rows = []
        if rows and session.peer_gone():
            # The client left while its FETCH blocked: the reply would go nowhere, so the job
            # goes back to its queue instead of waiting out a reservation nobody holds.
            await self._services.claim.hand_back(rows)
            return protocol.NIL
        if not rows:
            # Pace empty answers even when the fetch returned early (shutting down, database
            # away), so workers do not spin.
            await asyncio.sleep(max(0.0, wait - (time.monotonic() - started)))
            return protocol.NIL
        return protocol.bulk(protocol.dump_json(faktory_job(rows[0])))

    async def _ack(self, session: Session, payload: str) -> bytes:
        body = protocol.load_json(payload, "ACK")
        jid = _jid(body, "ACK")
        # Werk's addition: the ACK may carry the job's result (kept with a job pushed with
        # keep_result_for); Faktory's own clients send none.
        result = body.get("result")
        try:
            check_json(result)
        except ValueError as exc:
            raise InvalidRequest(f"ACK result: {exc}") from None
        # Faktory answers OK for an unknown or expired jid too; an attempt that is not this
        # worker's current reservation is left alone.
        await self._services.settle.ack_by_worker(jid, session.fetch_wid, result)
        return OK

    async def _fail(self, session: Session, payload: str) -> bytes:
        report = protocol.load_json(payload, "FAIL")
        jid = _jid(report, "FAIL")
        errtype = _text(report.get("errtype"), ERRTYPE_MAX) or "unknown"
        message = _text(report.get("message"), MESSAGE_MAX)
        lines = report.get("backtrace")
        backtrace = (
            [_text(x if isinstance(x, str) else str(x), LINE_MAX) for x in lines[:BACKTRACE_MAX]]
            if isinstance(lines, list)
            else []
        )
        try:
            await self._services.settle.fail_by_worker(
                jid, session.fetch_wid, errtype=errtype, message=message, backtrace=backtrace
            )
        except JobNotFound:
            return protocol.error(f"Job not found {jid}")
        return OK

    async def _beat(self, session: Session, payload: str) -> bytes:
        beat = protocol.load_json(payload, "BEAT")
        if not isinstance(beat, dict):
            raise InvalidJob("BEAT needs a JSON object")
        wid = beat.get("wid")
        if not isinstance(wid, str) or not wid:
            raise InvalidJob("BEAT needs a wid")
        if wid != session.wid and not self._known_worker(wid):
            return protocol.error(f"unknown worker {wid[:WID_MAX]}")
        rss = beat.get("rss_kb")
        reported = beat.get("current_state")
        state = await self._services.workers.beat(
            wid,
            hostname=session.hostname,
            pid=session.pid,
            labels=session.labels,
            rss_kb=rss if isinstance(rss, int) and not isinstance(rss, bool) and rss >= 0 else None,
            current_state=reported if reported in ("quiet", "terminate") else None,
        )
        if state.value == "running":
            return OK
        return protocol.bulk(protocol.dump_json({"state": state.value}))

    # -- operators -------------------------------------------------------------------------------

    async def _info(self, session: Session, payload: str) -> bytes:
        info = await self._services.info.info()
        sets = await self._ops.set_sizes()
        queues = {q["name"]: q["size"] for q in info["queues"]}
        now = datetime.now(UTC)
        body = {
            "now": now,
            "server_utc_time": now.strftime("%H:%M:%S UTC"),
            "faktory": {
                "queues": queues,
                "sets": {
                    "scheduled": sets.scheduled,
                    "retries": sets.retries,
                    "dead": sets.dead,
                    "working": sets.working,
                },
                "tasks": {
                    "Scheduled": {"size": sets.scheduled},
                    "Retries": {"size": sets.retries},
                    "Dead": {"size": sets.dead},
                    "Busy": {"size": sets.working},
                    "Workers": {"size": info["workers"]},
                },
                "total_processed": info["totals"]["processed"],
                "total_failures": info["totals"]["failed"],
                "total_enqueued": sum(queues.values()),
                "total_queues": len(queues),
            },
            "server": {
                "description": f"Werk {__version__} (Faktory work protocol)",
                "faktory_version": FAKTORY_VERSION,
                "werk_version": __version__,
                "uptime": int(time.monotonic() - self._stats.started),
                "connections": self._stats.connections,
                "command_count": self._stats.command_count,
                # ru_maxrss is in KiB on Linux: the peak resident size of this process.
                "used_memory_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            },
        }
        return protocol.bulk(protocol.dump_json(body))

    async def _flush(self, session: Session, payload: str) -> bytes:
        deleted = await self._ops.flush()
        log.warning(
            "FWP FLUSH from %s: %d jobs and all counters deleted", session.hostname, deleted
        )
        return OK

    async def _queue(self, session: Session, payload: str) -> bytes:
        action, _, rest = payload.partition(" ")
        action = action.upper()
        names = rest.split()
        if action not in ("PAUSE", "RESUME", "REMOVE", "LATENCY"):
            raise InvalidJob("use QUEUE PAUSE|RESUME|REMOVE|LATENCY <queue>... (* = all queues)")
        if not names:
            raise InvalidJob(f"QUEUE {action} needs at least one queue name (or *)")
        queues = self._services.queues
        if "*" in names:
            names = [q.name for q in await queues.list()]
        if action == "LATENCY":
            latencies = {name: await queues.latency(name) for name in names}
            return protocol.bulk(protocol.dump_json(latencies))
        for name in names:
            if action == "PAUSE":
                await queues.pause(name)
            elif action == "RESUME":
                await queues.resume(name)
            else:
                await queues.clear(name)
        return OK

    async def _mutate(self, session: Session, payload: str) -> bytes:
        body = protocol.load_json(payload, "MUTATE")
        if not isinstance(body, dict):
            raise InvalidJob("MUTATE needs a JSON object")
        cmd, target = body.get("cmd"), body.get("target")
        if not isinstance(cmd, str) or not isinstance(target, str):
            raise InvalidJob("MUTATE needs cmd and target")
        raw_filter = body.get("filter") or {}
        if not isinstance(raw_filter, dict):
            raise InvalidJob("MUTATE filter must be a JSON object")
        jobtype = raw_filter.get("jobtype") or None
        jids = raw_filter.get("jids") or None
        pattern = raw_filter.get("regexp") or None
        if jobtype is not None and not isinstance(jobtype, str):
            raise InvalidJob("filter.jobtype must be a string")
        if jids is not None and not (
            isinstance(jids, list) and all(isinstance(j, str) for j in jids)
        ):
            raise InvalidJob("filter.jids must be an array of strings")
        if pattern is not None and not isinstance(pattern, str):
            raise InvalidJob("filter.regexp must be a string")
        _storable([jobtype or "", pattern or "", *(jids or [])], "MUTATE filter")
        await self._ops.mutate(
            cmd.lower(),
            target.lower(),
            MutateFilter(
                jobtype=jobtype,
                jids=jids,
                regex=glob_to_regex(pattern) if pattern is not None else None,
            ),
        )
        return OK


def _not_unique(holder: str) -> str:
    """Faktory Enterprise refuses a unique job whose lock is held with NOTUNIQUE; the message
    names the holder."""
    return f"Job not unique: job {holder} holds its unique lock"


def glob_to_regex(pattern: str) -> str:
    """Faktory's filter.regexp is a Redis SCAN MATCH pattern (a glob over the job's JSON:
    ``*`` any run, ``?`` one character, ``[...]`` a class, ``\\x`` a literal x), anchored at both
    ends. Returns the same as a PostgreSQL regular expression."""
    out = ["^"]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("]", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("^"):
                    body = "^" + body[1:]
                out.append("[" + body + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return "".join(out)


def _jid(body: Any, verb: str) -> str:
    if not isinstance(body, dict) or not isinstance(body.get("jid"), str) or not body["jid"]:
        raise InvalidRequest(f"{verb} needs a JSON object with a jid")
    jid: str = body["jid"]
    _storable([jid], f"{verb} jid")
    return jid


def _storable(texts: list[str], what: str) -> None:
    """Names that select stored rows must be text PostgreSQL can hold: no stored row has any
    other, and the database refuses to compare them."""
    for text in texts:
        try:
            check_text(text)
        except ValueError as exc:
            raise InvalidRequest(f"{what} {exc}") from None


def _text(value: Any, limit: int) -> str:
    """Free text for a text column: NULs dropped, lone surrogates replaced, cut to ``limit``."""
    if not isinstance(value, str):
        return ""
    text = value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return text[:limit]


def _pid(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31:
        return value
    return None
