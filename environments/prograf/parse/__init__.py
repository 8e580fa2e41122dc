"""ProGraf's readers: a model's SVG, DOT, Mermaid or schemdraw code into the typed scene (`scene.py`),
sanitised first and never run. Imports only `environments.prograf.task` and itself."""
