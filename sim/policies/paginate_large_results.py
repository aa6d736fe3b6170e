"""``paginate_large_results``: a large tool result shows its first page and a continuation handle.

At settle time, a tool result over ``page_tokens`` tokens is paginated: the view keeps its first page
(the share of its bytes that ``page_tokens`` of its tokens stand for, so the page weighs about
``page_tokens``) and a line naming the next page. The later pages are hidden but exactly recoverable:
when an action needs a fact that lies in a later page, the agent reads that page (a page-read call,
``page_calls``; one per page the fact's bytes overlap), and the page joins the conversation. Nothing is
cut away, and nothing already sent is rewritten (settle time). The operation is the ledger's
``paginate``; a fact in a later page is ``paginated`` until it is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens, scale_tokens
from sim.policies.base import Change, Policy, View, check_int, register


def continuation_text(index: int, pages: int) -> str:
    return f"\n[page 1 of {pages}; the rest: read_page(result={index}, page=2)]\n"


def page_bytes(tokens: int, nbytes: int, page_tokens: int) -> int:
    """Bytes of one page of a result of ``tokens`` tokens and ``nbytes`` bytes (at least 1)."""
    return max(1, nbytes * page_tokens // max(tokens, 1))


@register
@dataclass(frozen=True)
class PaginateLargeResults(Policy):
    """Tool results over page_tokens show their first page and a continuation handle; later pages are
    read back on demand (one page-read call per page)."""

    page_tokens: int = 4000

    name = "paginate_large_results"
    size_grid = {
        "page_tokens": (1000, 2000, 4000, 8000, 16000)
    }  # ``ctxsim size --policy paginate_large_results``'s default grid
    size_trigger = False  # acts on every run, whatever its size
    settles = True
    spills = True  # it hides content behind a handle: needed facts may call for a page read
    conformance_settings = ({"page_tokens": 100},)

    def __post_init__(self) -> None:
        check_int(self.name, "page_tokens", self.page_tokens, 1)

    def settle(self, trace: Trace, state, index: int, view: View | None) -> Change | None:
        e = trace.events[index]
        if e.kind != "tool_result" or e.tokens <= self.page_tokens or e.bytes == 0:
            return None
        size = page_bytes(e.tokens, e.bytes, self.page_tokens)
        if size >= e.bytes:
            return None
        pages = -(-e.bytes // size)
        handle = len(continuation_text(index, pages).encode())
        tokens = scale_tokens(e.tokens, e.bytes, size) + estimate_tokens(handle, trace.bytes_per_token)
        return Change(index, ItemState.PAGINATED, tokens, size + handle, "paginate", ((0, size),))

    def reread_bound(self, trace: Trace, index: int) -> Change | None:
        """A re-run call's result is paginated again: its first page shows (as at settle time)."""
        return self.settle(trace, None, index, None)

    def settle_all(self, trace: Trace) -> list[Change]:
        return [c for c in (self.settle(trace, None, e.index, None) for e in trace.events) if c is not None]
