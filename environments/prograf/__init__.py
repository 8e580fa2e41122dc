"""ProGraf: structured-diagram generation (geometry, circuits, flowcharts, diagrams) checked by a
mechanical verifier. See README.md in this folder."""
