"""PyG 4x256 epoch anchors (GCN, GraphSAGE, GIN) for the MaxK comparison; trimmed from
the anchor script. Anchor measurements on the GPU machine: cuSPARSE SpMM (torch.sparse) and
PyG full-batch GCN / GraphSAGE epochs on a Reddit-shaped synthetic graph.

Reddit (DGL): 232,965 nodes, ~114.6M directed edges incl. self loops,
602 features, 41 classes. The synthetic graph matches node count, edge
count and a heavy-tailed degree distribution, with community structure.
Run: python3 pyg_anchor.py [--nodes N] [--avg-deg D]
"""
import argparse, json, math, os, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--nodes", type=int, default=232_965)
p.add_argument("--avg-deg", type=float, default=492.0)
p.add_argument("--feat", type=int, default=602)
p.add_argument("--classes", type=int, default=41)
p.add_argument("--out", default=os.environ.get("OUT", "."))
p.add_argument("--models", default="gcn,sage,gin", help="comma-separated subset of gcn,sage,gin")
args = p.parse_args()
dev = torch.device("cuda")
torch.manual_seed(0)
res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}


def bench(fn, warm=3, rep=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rep):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]

# Reddit-shaped graph: lognormal degrees scaled to avg_deg, communities
n, C = args.nodes, args.classes
deg = torch.distributions.LogNormal(0.0, 1.3).sample((n,)).to(dev)
deg = (deg / deg.mean() * (args.avg_deg - 1)).round().clamp(min=1, max=n - 1).long()
label = torch.randint(0, C, (n,), device=dev)
src = torch.repeat_interleave(torch.arange(n, device=dev), deg)
m = src.numel()
# 70% of neighbours from the same community, the rest uniform
order = torch.argsort(label)
counts = torch.bincount(label, minlength=C)
starts = torch.cumsum(counts, 0) - counts
same = torch.rand(m, device=dev) < 0.7
lab_src = label[src]
pick = starts[lab_src] + (torch.rand(m, device=dev) * counts[lab_src]).long()
dst = torch.where(same, order[pick], torch.randint(0, n, (m,), device=dev))
del same, lab_src, pick
# add self loops, sort into CSR
src = torch.cat([src, torch.arange(n, device=dev)])
dst = torch.cat([dst, torch.arange(n, device=dev)])
key = src * n + dst
key = torch.unique(key)
src, dst = key // n, key % n
del key
nnz = src.numel()
res["graph"] = {"nodes": n, "nnz": nnz, "max_deg": int(torch.bincount(src).max())}
rowptr = torch.zeros(n + 1, dtype=torch.long, device=dev)
rowptr[1:] = torch.cumsum(torch.bincount(src, minlength=n), 0)
dinv = torch.bincount(src, minlength=n).float().pow(-0.5)
val = dinv[src] * dinv[dst]
A = torch.sparse_csr_tensor(rowptr, dst, val, (n, n))
Ameans = torch.sparse_csr_tensor(rowptr, dst, (1.0 / torch.bincount(src, minlength=n).float())[src], (n, n))
del src

# PyG full-batch training epochs
import torch_geometric
from torch_geometric.nn import GCNConv, SAGEConv
res["pyg"] = torch_geometric.__version__
X = torch.randn(n, args.feat, device=dev)
Y = label
train = torch.rand(n, device=dev) < 0.66


class GCN(torch.nn.Module):
    def __init__(s, i, h, o, L):
        super().__init__()
        dims = [i] + [h] * (L - 1) + [o]
        s.convs = torch.nn.ModuleList(GCNConv(dims[k], dims[k + 1], normalize=False, cached=False) for k in range(L))
    def forward(s, x, adj):
        for k, c in enumerate(s.convs):
            x = c(x, adj)
            if k < len(s.convs) - 1:
                x = torch.nn.functional.dropout(torch.relu(x), 0.5, s.training)
        return x


class SAGE(torch.nn.Module):
    def __init__(s, i, h, o, L):
        super().__init__()
        dims = [i] + [h] * (L - 1) + [o]
        s.convs = torch.nn.ModuleList(SAGEConv(dims[k], dims[k + 1], aggr="mean") for k in range(L))
    def forward(s, x, adj):
        for k, c in enumerate(s.convs):
            x = c(x, adj)
            if k < len(s.convs) - 1:
                x = torch.nn.functional.dropout(torch.relu(x), 0.5, s.training)
        return x


def epoch_ms(model, adj):
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    def step():
        opt.zero_grad()
        out = model(X, adj)
        loss = torch.nn.functional.cross_entropy(out[train], Y[train])
        loss.backward(); opt.step()
    train_ms = bench(step, warm=3, rep=10)
    model.eval()
    with torch.no_grad():
        infer_ms = bench(lambda: model(X, adj), warm=2, rep=10)
    model.train()
    return round(train_ms, 2), round(infer_ms, 2)


from torch_geometric.nn import GINConv


class GIN(torch.nn.Module):
    def __init__(s, i, h, o, L):
        super().__init__()
        dims = [i] + [h] * (L - 1) + [o]
        s.convs = torch.nn.ModuleList(
            GINConv(torch.nn.Sequential(torch.nn.Linear(dims[k], h), torch.nn.ReLU(),
                                        torch.nn.Linear(h, dims[k + 1])), train_eps=True)
            for k in range(L))
    def forward(s, x, adj):
        for k, c in enumerate(s.convs):
            x = c(x, adj)
            if k < len(s.convs) - 1:
                x = torch.nn.functional.dropout(torch.relu(x), 0.5, s.training)
        return x


At = A.to_sparse_coo().t().to_sparse_csr()
Asum = torch.sparse_csr_tensor(rowptr, dst, torch.ones_like(val), (n, n)).to_sparse_coo().t().to_sparse_csr()
ep = {}
for name, cls, adj in [("gcn_4x256", GCN, At), ("sage_4x256", SAGE, Ameans), ("gin_4x256", GIN, Asum)]:
    if name.split("_")[0] not in args.models.split(","):
        continue
    try:
        torch.cuda.reset_peak_memory_stats()
        model = cls(args.feat, 256, C, 4).to(dev)
        tr, inf = epoch_ms(model, adj)
        ep[name] = {"train_epoch_ms": tr, "inference_ms": inf, "peak_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2)}
        del model
    except Exception as e:
        ep[name] = {"error": repr(e)[:300]}
res["pyg_epochs"] = ep
print(json.dumps(res, indent=1))
with open(os.path.join(args.out, "pyg_4x256.json"), "w") as f:
    json.dump(res, f, indent=1)
