"""Every bound on what a view sends or draws, in one place: the web payloads (WEB_*: what one JSON answer
may hold) and the notebook's server-side HTML (NOTEBOOK_*: what one output may hold). A view never
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
HIST_BINS = 32                  # bins of the per-program metric histograms (web charts and notebook)

# notebook HTML (notebook.py, svg.py)
NOTEBOOK_LAUNCHES = 16          # launches drawn in full by trace_html / report_html; the rest are only listed
NOTEBOOK_TRACE_CELLS = 8192     # SVG cells of all the grids of one trace_html together
NOTEBOOK_FINDINGS = 200         # rows of a findings table
NOTEBOOK_GRID_CELLS = 4096      # SVG cells of one launch's program grid (larger grids are drawn in blocks)
NOTEBOOK_Z = 8                  # z slices drawn
NOTEBOOK_TENSOR_CELLS = 128     # a tensor view is at most this many cells on each side
NOTEBOOK_TENSOR_VIEWS = 8       # tensors drawn for one program
NOTEBOOK_CELL_TITLES = 1024     # per-cell tooltips up to this many touched cells, one per colour above it
