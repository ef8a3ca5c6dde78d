"""The names the source rewrite (rewrite.py) writes into a kernel's loops, branches and exits, and binds in
its globals to the functions behind them (``rewrite.provide``). Apart from those functions so the rewrite, a
pure source transform, loads none of the masked control flow underneath it."""

PREFIX = "_triton_trace_"         # every name the rewrite adds: never merged, cut or put back
LOOP = PREFIX + "loop"            # loops.loop: a for loop's trips, masked per program
WHILE = PREFIX + "while"          # loops.while_loop
IF = PREFIX + "if"                # branches.branch: both sides of an if, masked per program
EXIT = PREFIX + "exit"            # exits.leave: an early return some programs take
CUT = PREFIX + "cut"              # exits.cut: the names read after it, cut to the programs left
RANGE = PREFIX + "range"          # induction.ranged: a loop left as it is, its variable typed as compiled
