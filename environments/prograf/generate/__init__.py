"""ProGraf's writers: seeded and hand-written tasks, their references and mutants (`emit.py`), and the
foreign-style corpus written a second way. Imports only `environments.prograf.task` and itself."""
