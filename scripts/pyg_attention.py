"""PyG's GATConv / TransformerConv trained full-batch on the graph files that
`../shared/anchors/same_graph.py --skip-pyg` writes (DGL's Reddit format), with the recipe
`train_reddit --model gat|transformer` uses on the same files, so both sides train the same
model on the same arrays:

- 2 layers; hidden layer 8 heads x 8 channels concatenated, ELU, dropout 0.5; output layer one
  head (GAT: concat=False), 41 classes; attention dropout 0.5 (PyG's `dropout=`);
- GAT: self loops as PyG adds them (the files already hold one per node; PyG removes and
  re-adds them, so the pattern is the same as ours); TransformerConv: root weight on, no beta;
- Adam lr 0.01, no weight decay, no input dropout, cross-entropy on the train split, evaluation
  every 5 epochs (test accuracy at the best validation accuracy).

Per-epoch time by CUDA events (median after 3 warm-up epochs), peak memory from
torch.cuda.max_memory_allocated. A model that runs out of memory is recorded as such.
Usage: python3 pyg_attention.py --dir DATA [--epochs 30] [--models gat,transformer]
"""
import argparse, json, os, time
import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--epochs", type=int, default=30)
p.add_argument("--models", default="gat,transformer")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--out", default=os.environ.get("OUT", "."))
args = p.parse_args()
dev = torch.device("cuda")

import torch_geometric
from torch_geometric.nn import GATConv, TransformerConv

data = np.load(os.path.join(args.dir, "reddit_data.npz"))
graph = np.load(os.path.join(args.dir, "reddit_graph.npz"))
X = torch.from_numpy(data["feature"]).float().to(dev)
Y = torch.from_numpy(data["label"]).long().to(dev)
types = torch.from_numpy(data["node_types"]).long().to(dev)
tr, va, te = types == 1, types == 2, types == 3
# DGL's COO: row = source, col = destination; PyG's edge_index is [source; target].
edge_index = torch.stack([torch.from_numpy(graph["row"].astype(np.int64)),
                          torch.from_numpy(graph["col"].astype(np.int64))]).to(dev)
n, C = X.shape[0], int(Y.max()) + 1
res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
       "pyg": torch_geometric.__version__, "nodes": n, "edges": edge_index.shape[1],
       "epochs": args.epochs, "runs": {}}


class Net(torch.nn.Module):
    def __init__(s, kind):
        super().__init__()
        if kind == "gat":
            s.c1 = GATConv(X.shape[1], 8, heads=8, concat=True, dropout=0.5)
            s.c2 = GATConv(64, C, heads=1, concat=False, dropout=0.5)
        else:
            s.c1 = TransformerConv(X.shape[1], 8, heads=8, concat=True, dropout=0.5, root_weight=True)
            s.c2 = TransformerConv(64, C, heads=1, concat=False, dropout=0.5, root_weight=True)

    def forward(s, x):
        x = torch.nn.functional.elu(s.c1(x, edge_index))
        x = torch.nn.functional.dropout(x, 0.5, s.training)
        return s.c2(x, edge_index)


def run(kind):
    torch.manual_seed(args.seed)
    model = Net(kind).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    times, best_val, test_at, best_ep, curve = [], -1.0, 0.0, -1, []
    for ep in range(args.epochs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        model.train()
        opt.zero_grad()
        out = model(X)
        loss = torch.nn.functional.cross_entropy(out[tr], Y[tr])
        loss.backward()
        opt.step()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
        if ep % 5 == 4 or ep == args.epochs - 1:
            model.eval()
            with torch.no_grad():
                pred = model(X).argmax(1)
            v = (pred[va] == Y[va]).float().mean().item()
            t = (pred[te] == Y[te]).float().mean().item()
            curve.append({"epoch": ep + 1, "loss": loss.item(), "val": v, "test": t})
            if v > best_val:
                best_val, test_at, best_ep = v, t, ep + 1
    times = sorted(times[3:])
    return {"epoch_ms_median": round(times[len(times) // 2], 2), "test_acc": round(test_at, 4),
            "best_val": round(best_val, 4), "best_epoch": best_ep, "curve": curve,
            "peak_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2)}


for kind in args.models.split(","):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    t = time.time()
    try:
        r = run(kind)
    except torch.OutOfMemoryError as ex:
        r = {"error": "out of memory", "detail": str(ex)[:300],
             "peak_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2)}
    r["wall_s"] = round(time.time() - t, 1)
    res["runs"][kind] = r
    print(kind, json.dumps({k: v for k, v in r.items() if k != "curve"}), flush=True)
os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "pyg_attention.json"), "w") as f:
    json.dump(res, f, indent=1)
