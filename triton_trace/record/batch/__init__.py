"""Batched execution: a chunk of programs runs in one numpy pass, with a leading program axis.

chunk (the chunk runner and its patches), running (the chunk a builder runs now, its sub-chunks, the value
its programs agree on), tensor (tensor-level patches: Python control flow on batched values),
memops (memory ops of a chunk), pointers (pointer arithmetic), affine (ops whose lanes are plain pointer
arithmetic), described (what is known about a block without reading its lanes), dot (``tl.dot`` for a chunk),
compact (a chunk's values cut down to some programs and put back), check (the exact check that a chunk computed
what running its programs one by one computes).
"""
