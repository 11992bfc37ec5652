"""PyG interop fixtures for tests/pyg_interop.rs (issues 13 and 14).

Runs where PyG is installed (the GPU machine; CPU tensors are enough). On the bundled Cora
files (PyG's Planetoid reads the same raw files, NormalizeFeatures = our row normalisation):
1. trains a PyG GCN, GraphSAGE (mean), GIN, GAT and TransformerConv model (2 layers, hidden
   16, convolutions in a `convs` ModuleList; ReLU between, ELU for GAT; the attention models
   with 4 hidden heads concatenated and one output head, concat=False) and writes each
   state_dict with `safetensors.torch` plus the eval-mode logits: `pyg_<kind>.safetensors`,
   `pyg_<kind>_logits.safetensors`;
2. loads our checkpoints (`--ours kind=path ...`) into the same PyG classes with
   `load_state_dict(strict=True)` and writes PyG's logits for them:
   `ours_<kind>_logits_by_pyg.safetensors`.
The Rust test loads (1) with `Gnn::load_pyg` and (2) with `Engine::load` and compares logits.

Usage (repo root):
  python3 scripts/pyg_interop.py --cora data/cora/raw --out tests/fixtures/pyg \
      --ours gcn=weights/gcn-cora.safetensors sage=weights/sage-cora-h16.safetensors \
             gin=tests/fixtures/pyg/ours_gin.safetensors
  python3 scripts/pyg_interop.py --cora data/cora/raw --out tests/fixtures/pyg \
      --kinds gat,transformer --report pyg_interop_attention.json \
      --ours gat=tests/fixtures/pyg/ours_gat.safetensors \
             transformer=tests/fixtures/pyg/ours_transformer.safetensors
(the heads and activation of our checkpoints are read from their `gnn.config` metadata).
"""
import argparse
import glob
import json
import os
import shutil
import tempfile

import torch
import torch_geometric
import torch_geometric.transforms as T
from safetensors.torch import load_file, save_file
from torch.nn import Linear, ReLU, Sequential
from torch_geometric.datasets import Planetoid
from safetensors import safe_open
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv, TransformerConv

p = argparse.ArgumentParser()
p.add_argument("--cora", required=True)
p.add_argument("--out", required=True)
p.add_argument("--ours", nargs="*", default=[])
p.add_argument("--epochs", type=int, default=100)
p.add_argument("--kinds", default="gcn,sage,gin")
p.add_argument("--report", default="pyg_interop.json")
p.add_argument("--heads", type=int, default=4)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)
torch.use_deterministic_algorithms(True)

root = tempfile.mkdtemp()
raw = os.path.join(root, "Cora", "raw")
os.makedirs(raw)
for f in glob.glob(os.path.join(args.cora, "ind.cora.*")):
    shutil.copy(f, raw)
data = Planetoid(root, "Cora", transform=T.NormalizeFeatures())[0]


def conv(kind, i, o, h, heads, last):
    if kind == "gcn":
        return GCNConv(i, o)
    if kind == "sage":
        return SAGEConv(i, o)  # mean aggregation, root weight: lin_l (bias), lin_r (no bias)
    if kind == "gin":
        return GINConv(Sequential(Linear(i, h), ReLU(), Linear(h, o)), train_eps=True)
    heads, width, concat = (1, o, False) if last else (heads, o // heads, True)
    if kind == "gat":
        return GATConv(i, width, heads=heads, concat=concat)
    if kind == "transformer":
        return TransformerConv(i, width, heads=heads, concat=concat, root_weight=True)
    raise ValueError(kind)


class Net(torch.nn.Module):
    def __init__(self, kind, i, h, o, layers, heads=1, act=None):
        super().__init__()
        dims = [i] + [h] * (layers - 1) + [o]
        self.convs = torch.nn.ModuleList(
            conv(kind, dims[k], dims[k + 1], h, heads, k == layers - 1) for k in range(layers))
        self.act = act or ("elu" if kind == "gat" else "relu")

    def forward(self, x, edge_index):
        for k, c in enumerate(self.convs):
            x = c(x, edge_index)
            if k < len(self.convs) - 1:
                x = torch.nn.functional.elu(x) if self.act == "elu" else torch.relu(x)
                x = torch.nn.functional.dropout(x, 0.5, self.training)
        return x


def accuracy(logits, mask):
    return (logits[mask].argmax(1) == data.y[mask]).float().mean().item()


report = {"torch": torch.__version__, "pyg": torch_geometric.__version__, "pyg_models": {}, "ours": {}}
for kind in args.kinds.split(","):
    torch.manual_seed(0)
    model = Net(kind, data.num_features, 16, 7, 2, heads=args.heads)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(args.epochs):
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        torch.nn.functional.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(data.x, data.edge_index)
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(args.out, f"pyg_{kind}.safetensors"))
    save_file({"logits": logits.contiguous()}, os.path.join(args.out, f"pyg_{kind}_logits.safetensors"))
    report["pyg_models"][kind] = {"tensors": {k: list(v.shape) for k, v in sd.items()},
                                  "test_acc": round(accuracy(logits, data.test_mask), 4)}
    print(kind, report["pyg_models"][kind], flush=True)

for spec in args.ours:
    kind, path = spec.split("=", 1)
    sd = load_file(path)
    with safe_open(path, "pt") as f:
        cfg = json.loads(f.metadata()["gnn.config"])
    model = Net(kind, cfg["in_dim"], cfg["hidden"], cfg["out_dim"], cfg["layers"],
                heads=cfg.get("heads", 1), act=cfg["activation"])
    model.load_state_dict(sd, strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(data.x, data.edge_index)
    save_file({"logits": logits.contiguous()},
              os.path.join(args.out, f"ours_{kind}_logits_by_pyg.safetensors"))
    report["ours"][kind] = {"file": path, "test_acc": round(accuracy(logits, data.test_mask), 4)}
    print("ours", kind, report["ours"][kind], flush=True)

with open(os.path.join(args.out, args.report), "w") as f:
    json.dump(report, f, indent=1)
