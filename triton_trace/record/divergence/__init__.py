"""Control flow that differs between the programs of a batched chunk, run as a GPU runs it (masked lanes).

loops (divergent trip counts), rewrite (the source rewrite behind them), names (the names the rewrite binds),
masked (what a masked loop and a masked if share: programs sitting a part out, values merged per program),
induction (a loop variable typed as compiled code types it), branches (``if`` on a per-program condition),
exits (an early ``return``).
"""
