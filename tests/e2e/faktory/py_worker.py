"""A worker written with PyPI `faktory` exactly as its README shows, run as its own process by
the tests: python py_worker.py URL QUEUES(comma-separated) WID OUTFILE BEAT_SECONDS.

Handlers: `ok` appends its args to OUTFILE as a JSON line; `boom` raises ValueError."""

import json
import logging
import sys

from faktory import Worker

url, queues, wid, outfile, beat = sys.argv[1:6]
logging.basicConfig(level=logging.INFO, format="py-worker %(levelname)s %(message)s")


def ok(*args):
    with open(outfile, "a") as f:
        f.write(json.dumps({"jobtype": "ok", "args": list(args)}) + "\n")


def boom(*args):
    raise ValueError(f"boom {args[0] if args else ''}")


worker = Worker(
    faktory=url, queues=queues.split(","), concurrency=2, use_threads=True, worker_id=wid
)
# The library's knob for its heartbeat period (default 15 s, first beat ~30 s after start).
worker.send_heartbeat_every = float(beat)
worker.register("ok", ok)
worker.register("boom", boom)
worker.run()
