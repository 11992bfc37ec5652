"""Rebuilds this record's two PyG rows from its raw same-graph-peers-r*.json.

The run (command.txt) wrote them as failed: bench/run.py's extract_same_graph_peer asked the
floors for a GAT epoch's SpMM widths, got none, and failed on them (TypeError). The raw
outputs are complete; after the fix (no widths: no floors, as for ours) this re-extracts the
rows with the runner's own functions, and drops those six failures from run_failures.
Run from the repository root: python3 bench/records/gat-sparse/h100-2026-11-28-2/before-lazy-rescale/resummarize.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))
import run  # noqa: E402  (bench/run.py)
import suite as suites  # noqa: E402

summary_path = os.path.join(HERE, "summary.json")
with open(summary_path) as f:
    doc = json.load(f)
with open(os.path.join(HERE, "graph.json")) as f:
    facts = json.load(f)
s = suites.load(os.path.join(HERE, "..", "..", "..", "suites", "gat-sparse.toml"))
reps = doc["rows"][0]["repetitions_wanted"]
rows = {r["id"]: r for r in doc["rows"]}
for m in s.measurements:
    if m.peer != "pyg":
        continue
    samples = []
    for r in range(1, reps + 1):
        raw = f"same-graph-peers-r{r}.json"
        with open(os.path.join(HERE, raw)) as f:
            smp = run.extract_same_graph_peer(json.load(f), m, facts, s.graph.get("args", []))
        smp["raw"] = raw
        samples.append(smp)
    rows[m.id] = run.summarize(m, samples, [], reps, doc["rates"])
doc["rows"] = [rows[r["id"]] for r in doc["rows"]]
doc["run_failures"] = [f for f in doc["run_failures"] if not f.get("row", "").endswith("/pyg")]
with open(summary_path, "w") as f:
    json.dump(doc, f, indent=1)
print("rebuilt", [m.id for m in s.measurements if m.peer == "pyg"])
