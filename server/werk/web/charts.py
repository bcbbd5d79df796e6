"""Geometry for the dashboard's inline SVG charts. Pure functions: numbers in, shapes out; the
templates draw them (autoescaped, so labels cannot inject markup)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

WIDTH = 760
HEIGHT = 180
PAD_LEFT = 48
PAD_BOTTOM = 22
PAD_TOP = 10

STATE_ORDER = (
    "available", "active", "scheduled", "waiting", "dead", "expired", "skipped", "cancelled",
    "completed",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    y_max: int
    x_labels: list[tuple[float, str]]
    baseline: float
    plot_left: int
    values: list[tuple[float, float, str]] = field(default_factory=list)  # x, y, text


def nice_max(value: float) -> int:
    """A round axis maximum at or above ``value``."""
    if value <= 0:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        top = int(step * magnitude)
        if top >= value:
            return top
    return int(10 * magnitude)


def history_chart(days: Sequence[Mapping[str, Any]]) -> Chart:
    """Processed (and, overlaid, failed) per day as bars."""
    plot_w = WIDTH - PAD_LEFT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    y_max = nice_max(max((d["processed"] for d in days), default=0))
    slot = plot_w / max(len(days), 1)
    bar_w = max(slot * 0.8, 1.0)
    baseline = PAD_TOP + plot_h
    bars: list[Bar] = []
    labels: list[tuple[float, str]] = []
    every = max(len(days) // 6, 1)
    for i, d in enumerate(days):
        x = PAD_LEFT + i * slot + (slot - bar_w) / 2
        title = f"{d['day']}: {d['processed']} processed, {d['failed']} failed"
        for key, css in (("processed", "ok"), ("failed", "bad")):
            h = plot_h * d[key] / y_max
            bars.append(Bar(round(x, 1), round(baseline - h, 1), round(bar_w, 1), round(h, 1),
                            css, title))  # fmt: skip
        if i % every == 0 or i == len(days) - 1:
            labels.append((round(x + bar_w / 2, 1), str(d["day"])[5:]))
    return Chart(WIDTH, HEIGHT, bars, y_max, labels, baseline, PAD_LEFT)


def depth_chart(queues: Sequence[Any]) -> Chart:
    """Each queue's jobs as a stacked bar by state (queue depth at a glance)."""
    plot_w = WIDTH - PAD_LEFT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    totals = [sum(q.counts.values()) for q in queues]
    y_max = nice_max(max(totals, default=0))
    slot = plot_w / max(len(queues), 1)
    bar_w = min(max(slot * 0.6, 2.0), 60.0)
    baseline = PAD_TOP + plot_h
    bars: list[Bar] = []
    labels: list[tuple[float, str]] = []
    values: list[tuple[float, float, str]] = []
    for i, q in enumerate(queues):
        x = PAD_LEFT + i * slot + (slot - bar_w) / 2
        top = baseline
        for state in STATE_ORDER:
            n = q.counts.get(state, 0)
            if not n:
                continue
            h = plot_h * n / y_max
            top -= h
            bars.append(Bar(round(x, 1), round(top, 1), round(bar_w, 1), round(h, 1),
                            f"st-{state}", f"{q.name}: {n} {state}"))  # fmt: skip
        labels.append((round(x + bar_w / 2, 1), q.name[:14]))
        values.append((round(x + bar_w / 2, 1), round(max(top - 4, 9), 1), f"{totals[i]:,}"))
    return Chart(WIDTH, HEIGHT, bars, y_max, labels, baseline, PAD_LEFT, values)
