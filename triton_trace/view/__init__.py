"""Display: typed, bounded payloads over a Trace and its analysis, one renderer for the browser and the notebook.

``routes`` (the one route table: path, answer, payload, parameters), ``answers`` (each API answer, shared by
the Flask app and the notebook), ``payload``/``contract``/``limits`` (the payloads and their bounds),
``blockview``, ``tensorview``/``tensormap``, ``compiledview``, ``compareview``, ``report_view``,
``evidence``, ``places``, ``lookup`` (what each view shows), ``app`` (the Flask app factory), ``server``
(``launch()``), ``notebook``/``embed``/``bundle`` (inline in Jupyter), ``download``, ``reload``,
``progress`` (the progress bar). Only this package imports Flask and plotly.
"""
