"""ProGraf's verifier: code -> scene (`parse`) -> a finding per verification point, the render path
it sees visibility through, the prompt-derived checker, and the verifier's audit and bench."""
