from tests.contract.fixtures import shared_werk

__all__ = ["shared_werk"]
