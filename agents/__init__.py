"""Agent graphs (LangGraph StateGraphs), one module per agent, built by `build(models, env, config)`."""
