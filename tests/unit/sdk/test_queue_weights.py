"""Weighted queue order: each fetch draws the order, heavier queues first more often."""

from __future__ import annotations

from collections import Counter

import pytest

from werk_client.worker_config import WorkerConfig, weighted_order


def test_strict_order_without_weights():
    config = WorkerConfig(queues=("critical", "default", "low"))
    assert {tuple(config.queue_order()) for _ in range(50)} == {("critical", "default", "low")}


def test_weighted_draw_puts_heavier_queues_first_proportionally():
    firsts = Counter(weighted_order(["a", "b", "c"], {"a": 6, "b": 3})[0] for _ in range(20_000))
    # Shares of first place follow the weights 6:3:1.
    assert abs(firsts["a"] / 20_000 - 0.6) < 0.03
    assert abs(firsts["b"] / 20_000 - 0.3) < 0.03
    assert abs(firsts["c"] / 20_000 - 0.1) < 0.03


def test_weights_are_checked():
    with pytest.raises(ValueError, match=">= 1"):
        WorkerConfig(queues=("a",), weights={"a": 0})
    with pytest.raises(ValueError, match="not in queues"):
        WorkerConfig(queues=("a",), weights={"b": 2})


def test_weights_from_the_queue_list(monkeypatch):
    monkeypatch.setenv("WERK_QUEUES", "critical:6,default:3,low")
    config = WorkerConfig.from_env()
    assert config.queues == ("critical", "default", "low")
    assert config.weights == {"critical": 6, "default": 3, "low": 1}
