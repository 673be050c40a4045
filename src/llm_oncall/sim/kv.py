"""KV block pool bookkeeping and the prefix cache.

vLLM hashes every full block of a prompt, chained on the previous block's hash, so a cached prefix is always a
contiguous run of blocks from the start of a token sequence. Chat turns and repeated documents extend the same
sequence, so the cache is kept per *chain* (a session, a document, the shared system prompt) as "the first N
blocks of this chain are resident". A lookup is then one dict access instead of one per block, which is what
makes a fleet of engines cheap to simulate; eviction drops whole least-recently-used chains.
"""

from __future__ import annotations

from collections import OrderedDict

SYSTEM_CHAIN = 0


class PrefixCache:
    __slots__ = ("block_size", "blocks", "chains", "enabled")

    def __init__(self, block_size: int, enabled: bool = True) -> None:
        self.block_size = block_size
        self.enabled = enabled
        self.chains: OrderedDict[int, int] = OrderedDict()
        self.blocks = 0

    def lookup(self, chain: int, prompt_len: int, system_len: int) -> int:
        """Tokens of the prompt found in the cache (block-aligned; at least one token is always computed)."""
        if not self.enabled:
            return 0
        bs = self.block_size
        limit = (prompt_len - 1) // bs
        hit = 0
        chains = self.chains
        cached = chains.get(chain)
        if cached is not None:
            chains.move_to_end(chain)
            hit = cached if cached < limit else limit
        if system_len and hit * bs < system_len:
            sys_cached = chains.get(SYSTEM_CHAIN)
            if sys_cached is not None:
                chains.move_to_end(SYSTEM_CHAIN)
                sys_blocks = min(sys_cached, system_len // bs, limit)
                if sys_blocks > hit:
                    hit = sys_blocks
        return hit * bs

    def insert(self, chain: int, tokens: int, system_len: int) -> None:
        """Record that the first `tokens` tokens of `chain` are now resident (full blocks only)."""
        if not self.enabled:
            return
        bs = self.block_size
        n = tokens // bs
        chains = self.chains
        old = chains.get(chain, 0)
        if n > old:
            chains[chain] = n
            self.blocks += n - old
        chains.move_to_end(chain)
        if system_len:
            sys_n = system_len // bs
            old_sys = chains.get(SYSTEM_CHAIN, 0)
            if sys_n > old_sys:
                chains[SYSTEM_CHAIN] = sys_n
                self.blocks += sys_n - old_sys
            chains.move_to_end(SYSTEM_CHAIN)

    def evict_to(self, capacity_blocks: int) -> None:
        chains = self.chains
        while self.blocks > capacity_blocks and chains:
            _, n = chains.popitem(last=False)
            self.blocks -= n

    def clear(self) -> None:
        self.chains.clear()
        self.blocks = 0
