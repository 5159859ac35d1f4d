"""Prefix caching in the simulator: cache blocks of shared prompt prefixes, per server.

A request may carry a *chain*: content its prompt shares with other requests, from its
first position on.  Three sources give chains:

* a named prefix (a trace's ``prefix`` column, or the prefix-caching lever's shared
  prefix drawn with its hit rate) of ``prefix_tokens`` tokens: every request with the
  same name starts with the same ``prefix_tokens`` tokens;
* a multi-turn session: every turn's prompt starts with the session's history (the
  earlier turns' prompts and outputs), and the whole sequence of a turn belongs to the
  session's chain, so the next turn can find it.

Each server keeps a :class:`PrefixCache` of whole blocks of ``block_tokens`` positions
(the cache page of paged attention; a partly filled block is private):

* **Lookup at admission.**  A request finds the leading blocks of its chain that are
  resident, at most ``⌊min(chain length, positions − 1) / block⌋`` blocks (the last
  prompt position is always computed: its logits give the next token).  It references
  them (a reference count per block) and prefills only what follows: a chunk ``(k, c)``
  with ``c`` the cached positions, which the cost model prices as attention over cached
  keys.  A request's *hit* is what it found at its first admission.
* **Registration.**  When a request's prefill completes, the blocks of its chain among
  its computed positions become resident and shared: the request references them in
  place of its private copy (a copy computed while another request registered the same
  blocks is dropped then).  When it finishes, or is evicted, the rest of its chain's
  blocks (a session's whole sequence: prompt and output) are kept too, and it drops
  its references.  Positions outside every chain are private and freed.
* **Occupancy.**  The cache holds each referenced block once, every running request's
  private positions, and *idle* blocks — resident blocks no running request references
  (a finished turn's history while its client thinks, a shared prefix between its
  users).  Admission and the overflow check count referenced and private positions; an
  idle block is free memory that still holds data: when the cache needs room (an
  iteration's new positions, a swapped-in request) idle blocks are evicted, least
  recently released first and the last block of a chain first (a chain is found only
  from its start), until referenced + private + idle positions fit the cache.  Only
  unreferenced blocks are ever evicted.

The engines call the same operations at the same scheduling points with the same
clock, and ties between chains released at the same instant are broken by chain
number, so the fast and the reference engine keep identical caches.  Engines without
chains (Lab 3) never build one.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .policies import Policy
    from .workload import Workload

__all__ = ["DEFAULT_BLOCK_TOKENS", "PrefixCache", "prefix_cache_for", "prefix_policies"]

#: Tokens per cache block when the scenario names none (vLLM's default block size).
DEFAULT_BLOCK_TOKENS = 16
#: A chain extent with no end (a session: the whole sequence belongs to its chain).
_UNBOUNDED = 1 << 62


class PrefixCache:
    """One server's cache of shared prefix blocks (see the module docstring).

    Per request: ``chain`` (−1: none), ``limit`` (prompt tokens its chain may supply),
    ``extent`` (tokens of its sequence that belong to its chain), ``held`` (leading
    blocks of its chain it references while running) and ``hits`` (tokens found cached
    at its first admission).  The engines add :attr:`excess` — referenced positions
    minus the references counted in the running requests' own positions — to the sum
    of running requests' cached positions to get the cache's occupancy.
    """

    def __init__(self, count: int, block: int, chains: Iterable[int], limits: Iterable[int],
                 sessions: int = 0):
        self.block = int(block)
        self.chain = list(chains)
        self.limit = list(limits)
        self.extent = list(limits)
        self.sessions = sessions  # session s is chain ``sessions + s``
        self.held = [0] * count
        self.hits = [0] * count
        self.admitted = [False] * count
        self.resident: dict[int, int] = {}  # chain -> resident leading blocks
        self.refs: dict[int, dict[int, int]] = {}  # chain -> {leading blocks: referencing requests}
        self.top: dict[int, int] = {}  # chain -> blocks referenced by at least one request
        self.stamps: dict[int, list[float]] = {}  # chain -> per resident block: time released
        self.heap: list[tuple[float, int]] = []  # (tail block's stamp, chain), lazily invalid
        self.referenced = 0  # positions in blocks some running request references
        self.holding = 0  # Σ over running requests of the positions they reference
        self.idle = 0  # positions in resident blocks no running request references
        self.evicted = 0  # positions of idle blocks evicted to make room

    @property
    def excess(self) -> int:
        """Occupancy beyond Σ cached positions of running requests: each shared block is
        counted once, not once per request that references it.
        """
        return self.referenced - self.holding

    def set_session(self, request: int, session: int, history: int) -> None:
        """Turn ``request`` of ``session``: its first ``history`` tokens are the session's."""
        self.chain[request] = self.sessions + session
        self.limit[request] = history
        self.extent[request] = _UNBOUNDED

    # ------------------------------------------------------------------ lookups
    def probe(self, request: int, total: int) -> tuple[int, int]:
        """(cached positions the request would find, of them those in idle blocks) if it
        were admitted now to hold ``total`` positions.
        """
        chain = self.chain[request]
        if chain < 0:
            return 0, 0
        blocks = min(self.resident.get(chain, 0), min(self.limit[request], total - 1) // self.block)
        if blocks <= 0:
            return 0, 0
        return blocks * self.block, max(0, blocks - self.top.get(chain, 0)) * self.block

    def need(self, request: int, total: int) -> int:
        """Positions admitting the request adds to the occupancy: what it must compute or
        bring back, plus the idle blocks it starts to reference.
        """
        hit, revived = self.probe(request, total)
        return total - hit + revived

    def take(self, request: int, total: int) -> int:
        """Admit ``request``: reference the cached leading blocks of its chain; returns
        the cached positions it starts with.
        """
        hit, _ = self.probe(request, total)
        if not self.admitted[request]:
            self.admitted[request] = True
            self.hits[request] = hit
        if hit:
            self._reference(request, hit // self.block)
        return hit

    def _reference(self, request: int, blocks: int) -> None:
        chain = self.chain[request]
        refs = self.refs.setdefault(chain, {})
        refs[blocks] = refs.get(blocks, 0) + 1
        top = self.top.get(chain, 0)
        if blocks > top:
            gained = (blocks - top) * self.block
            self.referenced += gained
            self.idle -= gained
            self.top[chain] = blocks
        self.held[request] = blocks
        self.holding += blocks * self.block

    def release(self, request: int, now: float) -> None:
        """The request stops referencing its blocks; those nobody references become idle."""
        blocks = self.held[request]
        if not blocks:
            return
        chain = self.chain[request]
        refs = self.refs[chain]
        refs[blocks] -= 1
        if not refs[blocks]:
            del refs[blocks]
        self.held[request] = 0
        self.holding -= blocks * self.block
        top = self.top[chain]
        new_top = max(refs) if refs else 0
        if new_top < top:
            freed = (top - new_top) * self.block
            self.referenced -= freed
            self.idle += freed
            self.top[chain] = new_top
            self.stamps[chain][new_top:top] = [now] * (top - new_top)
            self._push(chain)

    def register(self, request: int, positions: int, now: float, running: bool) -> None:
        """The blocks of the request's chain among its first ``positions`` computed
        positions become resident; a running request then references them all.
        """
        chain = self.chain[request]
        if chain < 0:
            return
        upto = min(self.extent[request], positions) // self.block
        resident = self.resident.get(chain, 0)
        if upto > resident:
            self.resident[chain] = upto
            self.idle += (upto - resident) * self.block
            self.stamps.setdefault(chain, []).extend([now] * (upto - resident))
            self._push(chain)
        if running and upto > self.held[request]:
            self.release(request, now)
            self._reference(request, upto)

    def leave(self, request: int, positions: int, now: float) -> None:
        """A request finishes or is evicted with ``positions`` computed: its chain's blocks
        are kept, its references dropped.
        """
        self.register(request, positions, now, running=False)
        self.release(request, now)

    # ------------------------------------------------------------------ eviction
    def _push(self, chain: int) -> None:
        resident = self.resident.get(chain, 0)
        if resident > self.top.get(chain, 0):
            heapq.heappush(self.heap, (self.stamps[chain][resident - 1], chain))

    def trim(self, occupied: int, kv: float, memory: float) -> None:
        """Evict idle blocks, least recently released first, until ``occupied``
        (referenced and private positions) plus the idle positions fit ``memory``.
        """
        heap, block = self.heap, self.block
        while self.idle and (occupied + self.idle) * kv > memory:
            stamp, chain = heap[0]
            resident = self.resident.get(chain, 0)
            if resident <= self.top.get(chain, 0) or self.stamps[chain][resident - 1] != stamp:
                heapq.heappop(heap)  # stale: the chain's tail changed since
                continue
            self.resident[chain] = resident - 1
            self.stamps[chain].pop()
            self.idle -= block
            self.evicted += block
            heapq.heappop(heap)
            self._push(chain)

    # ------------------------------------------------------------------ checks
    def positions(self) -> int:
        """Positions of every resident block (referenced and idle)."""
        return sum(self.resident.values()) * self.block


def prefix_cache_for(workload: Workload, policy: Policy) -> PrefixCache | None:
    """The cache a server keeps for ``workload`` under ``policy``, or None when no request
    can share anything (no named prefix, no session history to reuse, or prefix caching
    switched off): the engines then run exactly as without prefix caching.
    """
    if not policy.prefix_caching or policy.kind == "static":
        return None
    count = workload.count
    chains, limits = [-1] * count, [0] * count
    named: dict[str, int] = {}
    if workload.prefixes is not None and workload.prefix_tokens is not None:
        for request, (name, length) in enumerate(zip(workload.prefixes,
                                                     workload.prefix_tokens.tolist())):
            if name and length > 0:
                chains[request] = named.setdefault(name, len(named))
                limits[request] = int(length)
    sessions = workload.session_starts is not None and workload.reuse_history
    if not named and not sessions:
        return None
    return PrefixCache(count, policy.block_tokens, chains, limits, len(named))


#: Keys of a scenario's ``[simulation]`` table read here.
SCENARIO_KEYS = ("prefix_caching", "block_tokens")
#: Quantities that name the cache block size, first found wins (the prefix-caching
#: lever's block, then the batching lever's page).
BLOCK_QUANTITIES = ("prefix_block_tokens", "paged_block_tokens")


def prefix_policies(policies: Iterable[Policy], table: Mapping[str, Any],
                    values: Mapping[str, Any], workload: object = None, turns: int = 1,
                    reuse: bool = True) -> tuple[tuple[Policy, ...], list[str]]:
    """The policies with a scenario's prefix-cache settings, and the derivation lines.

    ``[simulation] prefix_caching`` (true by default) switches the prefix cache;
    ``block_tokens`` sets its block size, by default the scenario's own
    (:data:`BLOCK_QUANTITIES`), else :data:`DEFAULT_BLOCK_TOKENS`, for every policy
    whose ``block_tokens`` is still the default (a policy table may set its own).
    ``workload`` (the spec) and ``turns`` say whether anything can be shared, for the
    lines.
    """
    import attrs

    from .errors import SimulationError

    caching = table.get("prefix_caching", True)
    if not isinstance(caching, bool):
        raise SimulationError(f"simulation.prefix_caching must be true or false, got {caching!r}")
    block, source = table.get("block_tokens"), "simulation.block_tokens"
    if block is None:
        found = [name for name in BLOCK_QUANTITIES if name in values]
        source = found[0] if found else "the default"
        block = round(float(values[found[0]])) if found else DEFAULT_BLOCK_TOKENS
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise SimulationError(f"simulation.block_tokens must be a whole number of tokens >= 1, "
                              f"got {block!r}")
    changed = []
    for chosen in policies:
        fields: dict[str, Any] = {}
        if chosen.prefix_caching and not caching:
            fields["prefix_caching"] = False
        if chosen.block_tokens == DEFAULT_BLOCK_TOKENS:
            fields["block_tokens"] = block
        changed.append(attrs.evolve(chosen, **fields) if fields else chosen)
    notes = []
    if turns > 1:
        notes.append(f"multi-turn sessions: rates are sessions/s, {turns} turns each; each prompt "
                     "is the session's history plus a new message" + (
                         "; the history is found in the prefix cache while its blocks stay "
                         "there (idle and evictable while the client thinks)"
                         if reuse and caching else "; the history is prefilled again every turn"))
    trace = getattr(workload, "trace", None)
    named = getattr(workload, "prefix_tokens", 0) or (
        trace is not None and trace.prefix_tokens is not None)
    if named or (turns > 1 and reuse):
        notes.append(f"prefix cache: blocks of {block} tokens ({source}), one copy shared by "
                     "the requests that start with the same prefix, kept while idle and "
                     "evicted least recently released first" if caching else
                     "prefix cache: off (simulation.prefix_caching = false)")
    return tuple(changed), notes
