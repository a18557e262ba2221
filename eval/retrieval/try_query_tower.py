"""Experiment (not used by the retriever): fine-tune the last N layers of MiniLM as a query tower on the
same pseudo-queries and objective as train_query_adapter.py, chunk vectors fixed, and report dense-only
recall on the DEV split after each epoch.

    PTXRAG_HOME=... python eval/retrieval/try_query_tower.py [layers=1] [lr=2e-5] [epochs+1=4]

2026-12-04 s4, 1 layer, lr 3e-5: dev r@1 0.407 -> 0.444 at best (r@5 0.765 -> 0.809), below the linear
adapter's 0.463 / 0.802 at 1/100 of the training time and a 3.5 MB artefact instead of 266 KB: dropped."""

import re
import sys
import time

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from ptxrag.indexer import Retriever
from ptxrag.indexer.catalog import collection_key
from ptxrag.indexer.evaluation import load_queries, packaged_set, select
from ptxrag.indexer.pseudo import holdout, pseudo_queries
from ptxrag.indexer.retriever import dense_query

torch.manual_seed(17)
torch.set_num_threads(2)


def _norm(t):
    return re.sub(r"\s+", " ", re.sub(r"[*`]+", "", t)).strip().lower()


r = Retriever()
loaded = r._collection(collection_key("ptx-isa", "9.1"))
vecs, rows = r._vectors(loaded)
got = r._chroma(loaded).get(include=["documents"])
docmap = dict(zip(got["ids"], got["documents"], strict=True))
docs = [_norm(docmap[c]) for c in loaded.chunk_section]
n_sec = len(loaded.sections)
pq = pseudo_queries(loaded.sections)
target = np.asarray([loaded.row_of[q.section] for q in pq])
hidden = np.zeros((len(pq), len(docs)), dtype=bool)
for i, q in enumerate(pq):
    src = _norm(q.source_text)[:200]
    own = np.nonzero(rows == target[i])[0]
    hit = [c for c in own if src and src in docs[c]]
    if hit and len(hit) < len(own):
        hidden[i, hit] = True
held = np.asarray([holdout(q.query) for q in pq])
m = SentenceTransformer(r.spec.location, device="cpu")
for p in m.parameters():
    p.requires_grad = False
layers = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for layer in m[0].auto_model.encoder.layer[-layers:]:
    for p in layer.parameters():
        p.requires_grad = True
params = [p for p in m.parameters() if p.requires_grad]
print("trainable", sum(p.numel() for p in params))
opt = torch.optim.AdamW(params, lr=float(sys.argv[2]) if len(sys.argv) > 2 else 2e-5, weight_decay=0.01)
C = torch.from_numpy(vecs)
R = torch.from_numpy(rows).long()


def enc(texts):
    f = m.tokenize(texts)
    out = m(f)["sentence_embedding"]
    return torch.nn.functional.normalize(out, dim=1)


def secscore(q, hide=None):
    s = q @ C.T
    if hide is not None:
        s = s.masked_fill(hide, -2.0)
    return torch.full((q.shape[0], n_sec), -2.0).scatter_reduce(1, R.expand(q.shape[0], -1), s, reduce="amax")


dev = select(load_queries(packaged_set("9.1")), "dev")


def dev_recall():
    m.eval()
    with torch.no_grad():
        q = torch.cat([enc([dense_query(x.query) for x in dev[i : i + 64]]) for i in range(0, len(dev), 64)])
        top = secscore(q).topk(5, dim=1).indices.tolist()
    h1 = h5 = 0
    for qq, t in zip(dev, top, strict=True):
        nums = [loaded.sections[i].number for i in t]
        ok = [any(n == e or n.startswith(e + ".") for e in qq.expect) for n in nums]
        h1 += ok[0]
        h5 += any(ok)
    return h1 / len(dev), h5 / len(dev)


def held_recall():
    m.eval()
    idx = np.nonzero(held)[0]
    with torch.no_grad():
        q = torch.cat([enc([pq[i].query for i in idx[j : j + 64]]) for j in range(0, len(idx), 64)])
        s = secscore(q, torch.from_numpy(hidden[idx]))
    return float((s.argmax(1).numpy() == target[idx]).mean())


print("base dev", dev_recall(), "held", held_recall(), flush=True)
tr = np.nonzero(~held)[0]
T = torch.from_numpy(target).long()
H = torch.from_numpy(hidden)
t0 = time.time()
for ep in range(1, int(sys.argv[3]) if len(sys.argv) > 3 else 4):
    m.train()
    perm = np.random.default_rng(ep).permutation(tr)
    for j in range(0, len(perm), 32):
        b = perm[j : j + 32]
        q = enc([pq[i].query for i in b])
        loss = torch.nn.functional.cross_entropy(secscore(q, H[b]) / 0.05, T[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("epoch", ep, "dev", dev_recall(), "held", held_recall(), f"{time.time() - t0:.0f}s", flush=True)
