"""The memory hierarchy above the evidence chunks (L0): L1 events, L2 episodes, L3 concepts and a
graph over them, with views built on it (timeline, drift, distillation, forgetting, recall cards,
usage). Every node links to the exact chunks that support it, so every view drills down to them.

One module per level or view; `build.py` runs them in order. Nothing here prints: the CLI, the API
and the MCP server render the `to_dict`-style payloads these functions return.
"""
