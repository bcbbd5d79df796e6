"""Handlers of the timeout tests that run in process mode (child processes import them)."""

from __future__ import annotations

import signal
import time


def sleeps(seconds: float) -> str:
    time.sleep(seconds)
    return "finished"


def ignores_sigterm(seconds: float) -> str:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(seconds)
    return "finished"
