"""PyG interop fixtures for tests/pyg_interop.rs (issue 13).

Runs where PyG is installed (the GPU machine; CPU tensors are enough). On the bundled Cora
files (PyG's Planetoid reads the same raw files, NormalizeFeatures = our row normalisation):
1. trains a PyG GCN, GraphSAGE (mean) and GIN model (2 layers, hidden 16, convolutions in a
   `convs` ModuleList, ReLU between) and writes each state_dict with `safetensors.torch` plus
   the eval-mode logits: `pyg_<kind>.safetensors`, `pyg_<kind>_logits.safetensors`;
2. loads our checkpoints (`--ours kind=path ...`) into the same PyG classes with
   `load_state_dict(strict=True)` and writes PyG's logits for them:
   `ours_<kind>_logits_by_pyg.safetensors`.
The Rust test loads (1) with `Gnn::load_pyg` and (2) with `Engine::load` and compares logits.

Usage (repo root):
  python3 scripts/pyg_interop.py --cora data/cora/raw --out tests/fixtures/pyg \
      --ours gcn=weights/gcn-cora.safetensors sage=weights/sage-cora-h16.safetensors \
             gin=tests/fixtures/pyg/ours_gin.safetensors
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
from torch_geometric.nn import GCNConv, GINConv, SAGEConv

p = argparse.ArgumentParser()
p.add_argument("--cora", required=True)
p.add_argument("--out", required=True)
p.add_argument("--ours", nargs="*", default=[])
p.add_argument("--epochs", type=int, default=100)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)
torch.use_deterministic_algorithms(True)

root = tempfile.mkdtemp()
raw = os.path.join(root, "Cora", "raw")
os.makedirs(raw)
for f in glob.glob(os.path.join(args.cora, "ind.cora.*")):
    shutil.copy(f, raw)
data = Planetoid(root, "Cora", transform=T.NormalizeFeatures())[0]


def conv(kind, i, o, h):
    if kind == "gcn":
        return GCNConv(i, o)
    if kind == "sage":
        return SAGEConv(i, o)  # mean aggregation, root weight: lin_l (bias), lin_r (no bias)
    if kind == "gin":
        return GINConv(Sequential(Linear(i, h), ReLU(), Linear(h, o)), train_eps=True)
    raise ValueError(kind)


class Net(torch.nn.Module):
    def __init__(self, kind, i, h, o, layers):
        super().__init__()
        dims = [i] + [h] * (layers - 1) + [o]
        self.convs = torch.nn.ModuleList(conv(kind, dims[k], dims[k + 1], h) for k in range(layers))

    def forward(self, x, edge_index):
        for k, c in enumerate(self.convs):
            x = c(x, edge_index)
            if k < len(self.convs) - 1:
                x = torch.nn.functional.dropout(torch.relu(x), 0.5, self.training)
        return x


def accuracy(logits, mask):
    return (logits[mask].argmax(1) == data.y[mask]).float().mean().item()


report = {"torch": torch.__version__, "pyg": torch_geometric.__version__, "pyg_models": {}, "ours": {}}
for kind in ["gcn", "sage", "gin"]:
    torch.manual_seed(0)
    model = Net(kind, data.num_features, 16, 7, 2)
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
    layers = len({k.split(".")[1] for k in sd if k.startswith("convs.")})
    first = {"gcn": "lin.weight", "sage": "lin_l.weight", "gin": "nn.0.weight"}[kind]
    last = {"gcn": "lin.weight", "sage": "lin_l.weight", "gin": "nn.2.weight"}[kind]
    h, i = sd[f"convs.0.{first}"].shape
    o = sd[f"convs.{layers - 1}.{last}"].shape[0]
    model = Net(kind, i, h, o, layers)
    model.load_state_dict(sd, strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(data.x, data.edge_index)
    save_file({"logits": logits.contiguous()},
              os.path.join(args.out, f"ours_{kind}_logits_by_pyg.safetensors"))
    report["ours"][kind] = {"file": path, "test_acc": round(accuracy(logits, data.test_mask), 4)}
    print("ours", kind, report["ours"][kind], flush=True)

with open(os.path.join(args.out, "pyg_interop.json"), "w") as f:
    json.dump(report, f, indent=1)
