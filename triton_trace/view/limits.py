"""Every bound on what a view sends or draws, in one place: the web payloads (WEB_*: what one JSON answer
may hold) and the notebook outputs (EMBED_*: what one output carries). A view never
receives a whole large trace; these decide how much of it."""

# web payloads (payload.py, tensormap.py, tensorview.py)
MAX_GRID_CELLS = 1 << 14        # programs of one grid slice sent cell by cell (larger slices come in blocks)
MAX_OPS = 2000                  # ops of one program per page
MAX_FINDINGS = 1000             # the app asks the analysis for this many (analyze(max_findings=...))
MAX_SOURCE_LINES = 5000
MAX_LINE_CHARS = 400
MAX_LAUNCHES = 5000             # launches listed by /api/trace (the rest are counted)
MAX_TEXT = 1000                 # characters of any name, message or argument taken from the trace
MAX_ITEMS = 200                 # entries of an argument or config dict / list
MAX_PLANE_CELLS = 1 << 15       # cells of one drawn tensor plane; bounds the tensor payload
MAX_TENSOR_BYTES = 1_000_000    # bytes of one tensor answer
MAX_BLOCK_LANES = 1 << 16       # lanes of one op drawn by /api/launch/<i>/block (the first ones of a larger block)
MAX_DIFF_ELEMENTS = 20_000      # differing elements of one tensor listed by /api/launch/<i>/diff/<t>
MAX_HINTS = 50                  # hints of one launch in /api/launch/<i>
MAX_TOUCHES = 1000              # accesses to one element listed by /api/launch/<i>/touches/<t>
MAX_TILE_CELLS = 1 << 14        # cells of one tensor's plane in /api/launch/<i>/tiles (a window past it)
MAX_TILE_TENSORS = 16           # tensors of one program drawn side by side by /api/launch/<i>/tiles
MAX_PANELS = 32                 # planes of one /api/launch/<i>/planes answer (small multiples; the page steps on)
MULTIPLES_DEFAULT = 16          # a 3-D tensor of at most this many planes opens as small multiples (tensor.js too)
MAX_VALUE_CELLS = 4096          # cells of a storage or tile plane sent with their values (coarser blocks past it)
HIST_BINS = 32                  # bins of the per-program metric histograms (web charts and notebook)

# notebook outputs (embed.py, notebook.py): the same payloads, inlined
EMBED_BYTES = 150_000           # JSON one output carries (the trace and the opened launch always fit in)
EMBED_ALL_BYTES = 40_000        # JSON of one all-programs tensor view in an output (values, then program ids, dropped past it)
EMBED_LAUNCHES = 16             # launches whose panels an output carries; the rest are only listed
EMBED_ELEMENTS = 256            # elements of the opened program whose accesses and feeds an output carries
EMBED_ELEMENT_SHARE = 3         # ... in at most this share (1/n) of the output's bytes
EMBED_STEPS = 16                # loop steps of the opened program's tiles an output carries (after every step at once)
REPORT_ROWS = 200               # rows of a report's findings table (a Report shown on its own)
