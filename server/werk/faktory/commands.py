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
from werk.domain.job import JID_PATTERN, RSS_KB_MAX, OnConflict
from werk.domain.json_values import check_json, check_text
from werk.domain.unique import unique_lock
from werk.errors import BatchNotFound, DatabaseUnavailable, InvalidRequest, JobNotFound, WerkError
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
from werk.services.queues import check_queue_name

log = logging.getLogger(__name__)

FAKTORY_VERSION = "1.10.0"
MAX_FETCH_QUEUES = 100
WID_MAX = 100
LINE_MAX = 10_000  # one backtrace line
# A bid as HTTP takes one in a path: what a jid may be, shorter.
_BID = re.compile(JID_PATTERN)
# The reply key of a PUSHB item without a usable jid; no jid starts with it.
POSITION_MARK = "#"
TWICE = "the jid appears twice in the batch: only its first copy is pushed"


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
    # Whether the client has left: closed its side or reset the connection (set by the server).
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
        """Answers a map of the jobs not stored (by jid, or by POSITION_MARK and index for an
        item without a usable jid) to why; the other jobs are stored together."""
        raw = protocol.load_json(payload, "PUSHB")
        if not isinstance(raw, list):
            raise InvalidJob("PUSHB needs a JSON array of jobs")
        if len(raw) > self._settings.max_batch:
            raise InvalidJob(f"PUSHB takes at most {self._settings.max_batch} jobs")
        specs, rejected = _pushb_specs(raw)
        _set_aside(specs, rejected, await self._unjoinable(specs))
        _set_aside(specs, rejected, _unique_clashes(specs))
        if specs:
            results = await self._services.push.push(list(specs.values()))
            for jid, result in zip(specs, results, strict=True):
                if result.conflict is OnConflict.REJECT:
                    rejected[jid] = f"NOTUNIQUE {_not_unique(result.job['jid'])}"
        return protocol.bulk(protocol.dump_json(rejected))

    async def _unjoinable(self, specs: dict[str, JobPush]) -> dict[str, str]:
        """The jobs of a PUSHB naming a batch they cannot join (not found, committed,
        finished): each is refused alone, where the push would refuse them all."""
        closed: dict[str, str] = {}
        for bid in dict.fromkeys(s.batch for s in specs.values() if s.batch is not None):
            reason = await self._why_closed(bid)
            if reason is not None:
                closed[bid] = reason
        return {jid: closed[s.batch] for jid, s in specs.items() if s.batch in closed}

    async def _why_closed(self, bid: str) -> str | None:
        """Why no job may join the batch now (worded as the push would), or None when it is
        open."""
        try:
            row = await self._services.batches.get(bid)
        except BatchNotFound as exc:
            return exc.detail
        if row["completed_at"] is not None:
            return f"batch {bid} has finished"
        if row["committed"]:
            return f"batch {bid} is committed: open it again to add members"
        return None

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
        if not rest:
            raise InvalidRequest(f"BATCH {sub} needs a bid")
        _check_bid(rest, f"BATCH {sub}")
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
        if parent is not None:
            if not isinstance(parent, str):
                raise InvalidJob("parent_bid must be a string")
            _check_bid(parent, "BATCH NEW parent_bid")
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
        # Refused here: the no-job answer below stands for a database outage, not a name that
        # could never hold a job.
        for name in queues:
            check_queue_name(name)
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
        if not isinstance(rss, int) or isinstance(rss, bool):
            rss = None  # left out, not refused: the beat itself matters more than the figure
        elif not 0 <= rss <= RSS_KB_MAX:
            raise InvalidRequest(f"BEAT rss_kb must be an integer from 0 to {RSS_KB_MAX}")
        reported = beat.get("current_state")
        state = await self._services.workers.beat(
            wid,
            hostname=session.hostname,
            pid=session.pid,
            labels=session.labels,
            rss_kb=rss,
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
        # %r: the hostname is the client's text, and must not start a log line of its own.
        log.warning(
            "FWP FLUSH from %r: %d jobs and all counters deleted", session.hostname, deleted
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
        if len(names) > MAX_FETCH_QUEUES:
            raise InvalidJob(f"QUEUE {action} takes at most {MAX_FETCH_QUEUES} queue names")
        queues = self._services.queues
        if "*" in names:
            names = [q.name for q in await queues.list()]
        for name in names:  # all checked before any queue changes
            check_queue_name(name)
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


def _pushb_specs(raw: list[Any]) -> tuple[dict[str, JobPush], dict[str, str]]:
    """PUSHB's valid jobs by jid, and the reply entries of the others. A jid met again is
    refused: only its first copy counts, valid or not."""
    specs: dict[str, JobPush] = {}
    rejected: dict[str, str] = {}
    for i, item in enumerate(raw):
        jid = item.get("jid") if isinstance(item, dict) else None
        key = f"{POSITION_MARK}{i}"
        if isinstance(jid, str) and jid and not jid.startswith(POSITION_MARK):
            key = jid
        if key in specs or key in rejected:
            rejected.setdefault(key, TWICE)
            continue
        try:
            specs[key] = job_spec(item)
        except InvalidJob as exc:
            rejected[key] = str(exc)
    return specs, rejected


def _set_aside(
    specs: dict[str, JobPush], rejected: dict[str, str], problems: dict[str, str]
) -> None:
    for jid, reason in problems.items():
        del specs[jid]
        rejected[jid] = reason


def _unique_clashes(specs: dict[str, JobPush]) -> dict[str, str]:
    """The jobs of a PUSHB the push would refuse together with the others: a unique job that
    joins a batch; a unique job beside jobs that join one; a unique key already taken by an
    earlier job of the PUSHB (that one holds it, as if pushed first)."""
    joining = any(s.batch is not None for s in specs.values())
    holders: dict[str, str] = {}
    clashes: dict[str, str] = {}
    for jid, spec in specs.items():
        if spec.unique is None:
            continue
        if spec.batch is not None:
            clashes[jid] = "a job that joins a batch cannot be unique"
        elif joining:
            clashes[jid] = "a unique job cannot share a PUSHB with jobs that join a batch"
        else:
            key = unique_lock(spec, spec.unique).key
            holder = holders.setdefault(key, jid)
            if holder != jid:
                clashes[jid] = (
                    f"NOTUNIQUE Job not unique: job {holder} of this PUSHB has the same unique key"
                )
    return clashes


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


def _check_bid(bid: str, what: str) -> None:
    """A bid as HTTP takes one in a path; no other names a batch (nor can PostgreSQL hold
    some)."""
    if len(bid) > BID_MAX_LENGTH or not _BID.fullmatch(bid):
        raise InvalidRequest(
            f"{what}: invalid bid (1-{BID_MAX_LENGTH} characters from A-Z a-z 0-9, after the "
            "first also . _ ~ : @ + = -)"
        )


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
