"""The Cora citation dataset: a synthetic stand-in in Cora's own file format, and load_cora().

cora.content has one line per paper: `<paper_id> <binary word attributes...> <class_label>`;
cora.cites one line per citation: `<ID of cited paper> <ID of citing paper>`. load_cora follows
pytorch/examples gat/main.py: row-normalised features, label indices, a dense adjacency matrix
with self-loops.
"""
import os

import numpy as np
import torch

CLASSES = ["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
           "Reinforcement_Learning", "Rule_Learning", "Theory"]


def write_synthetic_cora(path, n_nodes=210, n_words=60, n_edges=600, seed=0):
    """Papers of a class use that class's words more often and mostly cite papers of their own class."""
    rng = np.random.default_rng(seed)
    os.makedirs(path, exist_ok=True)
    labels = rng.integers(0, len(CLASSES), size=n_nodes)
    ids = rng.choice(np.arange(1000, 100000), size=n_nodes, replace=False)
    topic = rng.random((len(CLASSES), n_words)) < 0.15
    with open(os.path.join(path, "cora.content"), "w") as f:
        for pid, y in zip(ids, labels):
            p = np.where(topic[y], 0.5, 0.04)
            words = (rng.random(n_words) < p).astype(int)
            f.write("\t".join([str(pid), *map(str, words), CLASSES[y]]) + "\n")
    seen = set()
    with open(os.path.join(path, "cora.cites"), "w") as f:
        while len(seen) < n_edges:
            i = int(rng.integers(n_nodes))
            same = np.flatnonzero(labels == labels[i])
            j = int(rng.choice(same)) if rng.random() < 0.85 else int(rng.integers(n_nodes))
            if i != j and (i, j) not in seen:
                seen.add((i, j))
                f.write(f"{ids[j]}\t{ids[i]}\n")


def load_cora(path="./cora", device="cpu"):
    content = np.genfromtxt(os.path.join(path, "cora.content"), dtype=np.dtype(str))
    cites = np.genfromtxt(os.path.join(path, "cora.cites"), dtype=np.int32)

    features = torch.FloatTensor(content[:, 1:-1].astype(np.int32))
    scale_vector = 1 / torch.sum(features, dim=1)
    scale_vector[scale_vector == float("inf")] = 0
    features = torch.diag(scale_vector) @ features

    classes, labels = np.unique(content[:, -1], return_inverse=True)
    labels = torch.LongTensor(labels)

    idx = content[:, 0].astype(np.int32)
    idx_map = {pid: pos for pos, pid in enumerate(idx)}
    edges = np.array([[idx_map[a], idx_map[b]] for a, b in cites], dtype=np.int64)
    V, E = len(idx), edges.shape[0]
    adj_mat = torch.sparse_coo_tensor(torch.from_numpy(edges.T), torch.ones(E), (V, V), check_invariants=True).to_dense()
    adj_mat = ((adj_mat + adj_mat.T + torch.eye(V)) > 0).float()  # symmetric, with self-loops
    return features.to(device), labels.to(device), adj_mat.to(device)
