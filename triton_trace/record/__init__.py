"""Recording: the trace decorator and session, the interpreter hooks, the collector."""
