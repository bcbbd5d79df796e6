"""Batches: their ids and the kinds of callback a batch may carry."""

from __future__ import annotations

from werk.domain.jids import new_jid

# complete: every member settled; success: every member completed; death: a member ended
# without completing (the first).
CALLBACK_KINDS = ("complete", "success", "death")
DESCRIPTION_MAX_LENGTH = 1000
# A bid leaves room in a jid's length for the "/<kind>" its callbacks wait on.
BID_MAX_LENGTH = 90
# A member's settling climbs its batch's ancestors one nested call at a time, and PostgreSQL
# refuses a climb some hundreds deep (its stack limit): the job could then never settle.
MAX_DEPTH = 64


def new_bid() -> str:
    return "b-" + new_jid()
