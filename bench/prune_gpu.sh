#!/bin/sh
# What `prune: on` buys on a GPU with a real PyTorch training: the same conference (a scripted
# learning-rate / weight-decay search on a small character-level transformer) runs with pruning
# off and on, each for the same time budget, and the figures are printed side by side.
#
#   sh bench/prune_gpu.sh [BUDGET]      # from the repository root; BUDGET per arm, default 4m
#   ARMS="off on early" sh bench/prune_gpu.sh 3m   # the arms, `prune:` values (default: off on)
#   KEEP=dir sh bench/prune_gpu.sh              # also keep each arm's event log (ARM.log.jsonl)
#
# Each arm runs past its budget by the evaluation under way at its end and the peer review's and
# knowledge transfer's full readings: with the default training (about 30 s on an H100), allow
# BUDGET + 2 minutes per arm, and 40 s for the first training.
#
# Needs: target/release/git-conference (built here with `cargo build --release` when cargo is
# installed and the binary is missing), git, python3 with torch and a CUDA device. It makes its
# own project in a temporary folder, needs no network (the training data is generated), and
# leaves nothing behind but what it prints.
set -eu

budget=${1:-4m}
arms=${ARMS:-off on}
root=$(pwd)
binary="$root/target/release/git-conference"
if [ ! -x "$binary" ]; then
    if command -v cargo >/dev/null 2>&1; then
        cargo build --release --locked
    else
        echo "prune_gpu.sh: no $binary and no cargo to build it; copy the binary there" >&2
        exit 1
    fi
fi
if ! python3 -c 'import torch' 2>/dev/null; then
    echo "prune_gpu.sh: python3 cannot import torch on this machine: nothing measured" >&2
    exit 1
fi
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "prune_gpu.sh: torch sees no CUDA device on this machine: nothing measured" >&2
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/prune-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
ln -s "$binary" "$work/bin/git-conference"
PATH="$work/bin:$PATH"
export PATH

# --- the project: a training that prints its validation loss as it goes -------------------------
mkdir "$work/project"
cd "$work/project"
cat >train.py <<'EOF'
"""A small character-level transformer on generated text; prints val_loss as it trains.

The text comes from a fixed random order-2 Markov chain over 48 symbols, so there is something to
learn and nothing to download. params.txt holds the learning rate and the weight decay.
"""
import math, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

p = dict(line.split("=", 1) for line in open("params.txt").read().split())
lr, wd = float(p["lr"]), float(p["wd"])
STEPS, EVERY, BATCH, SEQ, VOCAB, DIM = 1500, 75, 64, 128, 48, 192
dev = "cuda"
torch.manual_seed(0)
g = torch.Generator().manual_seed(1234)
table = torch.softmax(torch.randn(VOCAB, VOCAB, VOCAB, generator=g) * 2.5, dim=-1)

def text(chains, length, seed):
    """`chains` independent walks of the chain, `length` symbols each, generated step by step
    for all walks at once, joined end to end."""
    gen = torch.Generator().manual_seed(seed)
    walk = torch.zeros(chains, length, dtype=torch.long)
    walk[:, 1] = torch.randint(0, VOCAB, (chains,), generator=gen)
    for i in range(2, length):
        probs = table[walk[:, i - 2], walk[:, i - 1]]
        walk[:, i] = torch.multinomial(probs, 1, generator=gen).squeeze(1)
    return walk.reshape(-1)

train_data, val_data = text(1000, 200, 1).to(dev), text(100, 200, 2).to(dev)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.out = nn.Linear(DIM, VOCAB)
    def forward(self, idx):
        mask = torch.triu(torch.ones(SEQ, SEQ, device=dev, dtype=torch.bool), 1)
        x = self.emb(idx) + self.pos(torch.arange(SEQ, device=dev))
        for b in self.blocks:
            x = b(x, mask)
        return self.out(x)

def batch(data, gen):
    i = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=gen, device="cpu").to(dev)
    idx = i[:, None] + torch.arange(SEQ + 1, device=dev)
    chunk = data[idx]
    return chunk[:, :-1], chunk[:, 1:]

model = Model().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * s / STEPS)))
gen, val_gen = torch.Generator().manual_seed(7), torch.Generator().manual_seed(8)
val_batches = [batch(val_data, val_gen) for _ in range(8)]

def val_loss():
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        losses = [F.cross_entropy(model(x).float().reshape(-1, VOCAB), y.reshape(-1)) for x, y in val_batches]
    model.train()
    v = torch.stack(losses).mean().item()
    return v if math.isfinite(v) else 99.0

for step in range(1, STEPS + 1):
    x, y = batch(train_data, gen)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x).float().reshape(-1, VOCAB), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    if step % EVERY == 0:
        v = val_loss()
        print(f"val_loss@step={step}: {v:.5f}", flush=True)
print(f"val_loss: {v:.5f}", flush=True)
EOF
cat >agent.py <<'EOF'
"""Random search around the best (as in bench/prune_quality.py): four proposals in five perturb
the best's learning rate and weight decay, one in five is drawn afresh; seeded by the proposal
count of this conference, so both arms draw the same numbers."""
import math, os, random, subprocess, sys
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True, text=True,
                        check=True).stdout.strip()
counter = os.path.join(common, "proposals-" + os.environ["CONFERENCE_NAME"])
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
rng = random.Random(int(sys.argv[1]) * 1_000_003 + n)
best = dict(line.split("=", 1) for line in open("params.txt").read().split())
if rng.random() < 0.2:
    x, wd = rng.uniform(-4.5, -1.5), rng.uniform(0.0, 0.3)
else:
    x = math.log10(float(best["lr"])) + rng.gauss(0.0, 0.3)
    wd = float(best["wd"]) + rng.gauss(0.0, 0.05)
x, wd = min(max(x, -4.5), -1.5), min(max(wd, 0.0), 0.3)
open("params.txt", "w").write(f"lr={10 ** x:.6g}\nwd={wd:.4f}\n")
with open(os.environ["CONFERENCE_NOTE_FILE"], "w") as f:
    f.write(f"lr {10 ** x:.3g}, wd {wd:.3f}\n")
EOF
printf 'lr=0.0001\nwd=0.0000\n' >params.txt

conference() { # NAME PRUNE
    cat <<EOF
# Conference: $1
## Goal
Lower the validation loss.
## Mode
metric
## Success Metric
- **Metric:** val_loss
- **Target:** none
- **Direction:** minimize
## Researchers
- **Count:** 1
- **Iterations per round:** 100
- **Max rounds:** 100
## Search Space
**Allowed changes:**
- params.txt
## Search Space Partitioning
**Strategy:** free
## Constraints
- **Max total iterations:** 10000
- **Time budget:** $budget
- **Stall rounds:** never
## Evaluation
- command: python3 train.py
- timeout: 3m
- frozen: train.py, agent.py
- prune: $2
## Agent
- command: python3 agent.py 1
- timeout: 1m
EOF
}

git init -q -b main
git -c user.name=bench -c user.email=bench@example.invalid add -A
git -c user.name=bench -c user.email=bench@example.invalid commit -q -m "a small training"
echo "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), torch $(python3 -c 'import torch; print(torch.__version__)')"
echo "one full training, measured once before the conferences:"
start=$(date +%s)
python3 train.py | tail -1
echo "  $(( $(date +%s) - start ))s wall (process start, CUDA init and training)"

summary() { # NAME
    git conference status "$1" --format json >"$work/status.json"
    git conference log "$1" --format jsonl >"$work/log.jsonl"
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP" && cp "$work/log.jsonl" "$KEEP/$1.log.jsonl"
    fi
    python3 - "$1" "$work/status.json" "$work/log.jsonl" <<'EOF'
import json, sys
name, st, log = sys.argv[1], json.load(open(sys.argv[2])), [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
its = [e["payload"] for e in log if e["event"] == "researcher.iteration"]
c = st["researchers"]["A"]["counts"]
eval_s = sum(p.get("eval_s") or 0 for p in its)
pruned = [p for p in its if p["status"] == "pruned"]
steps = sorted(p["notes"][0]["pruned"]["step"] for p in pruned if p.get("notes") and "pruned" in p["notes"][0])
print(f"{name:<10} attempts {len(its):>3}  kept {c['kept']:>2}  pruned {c.get('pruned', 0):>3}  "
      f"reverted {c['reverted']:>3}  best {st['best']['metric']:.5f}  "
      f"research GPU time {eval_s:.0f}s ({eval_s / max(len(its), 1):.1f}s per attempt)  "
      f"kept per GPU-hour {c['kept'] / (eval_s / 3600) if eval_s else 0:.1f}  "
      f"pruned at steps {steps}")
EOF
}

for arm in $arms; do
    conference "prune-$arm" "$arm" >conference.md
    echo "running prune: $arm for $budget ..."
    git conference start "prune-$arm" --yes >"$work/$arm.out" 2>&1 || {
        echo "git conference start failed:" >&2
        tail -20 "$work/$arm.out" >&2
        exit 1
    }
done
echo
for arm in $arms; do
    summary "prune-$arm"
done
