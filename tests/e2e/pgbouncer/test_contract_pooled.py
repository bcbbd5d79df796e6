"""The client contract's scenarios replayed against a server behind PgBouncer in transaction
pooling mode (this folder's ``shared_werk``), unchanged."""

from tests.e2e.contract.test_contract import test_scenario

__all__ = ["test_scenario"]
