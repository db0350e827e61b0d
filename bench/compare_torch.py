#!/usr/bin/python3
"""headlab against PyTorch: the same model, task and optimizer, side by side.

Runs `headlab bench --json` and the PyTorch twin below for each preset and
thread count, each framework in its own fresh process, alternating the two a
few times so that both see the same machine load, and prints the median
ms/step, the ratio headlab / PyTorch and each one's peak RSS.

The model is the one of `headlab bench`'s presets: pre-LN decoder, token +
position embeddings, multi-head attention with q/k/v/o Linear layers (bias),
causal mask, GELU MLP with d_ff = 4 d, final LayerNorm, a Linear head.
Task `previous`: tokens uniform over V, target = the previous token, position
0 has none (ignore_index -1); loss = mean cross-entropy. AdamW lr 1e-3,
weight decay 0.01, gradient clipping at 1.0 (headlab's default), and the
step's accuracy is computed as headlab's step does.

PyTorch gets its best: torch.set_num_threads(N), the OpenMP build of
OpenBLAS (Debian's torch takes fp32 GEMM from the system OpenBLAS; the
pthread build would fight OpenMP for the cores), and the same warm-up
headlab's process gets: one large GEMM at N threads before the first step
(on these 2-vCPU VMs it separates OpenMP's threads onto their own CPUs; see
docs/performance.md). The worker checks which libopenblas it loaded and
reports it, with the kernels OpenBLAS picked. OpenBLAS picks them from the
CPU's model number, and a model newer than its release (Debian 12's 0.3.21
on an Intel Xeon of family 6 model 207) leaves it on its generic SSE3
kernels ("Prescott"), at a fraction of the CPU's speed. Where
OPENBLAS_CORETYPE is unset and OpenBLAS would fall back so, the twin gets
OPENBLAS_CORETYPE set to the kernels the CPU's flags allow (SkylakeX with
AVX-512, Haswell with AVX2 and FMA), and the script says so; a value set in
the environment is left alone.

Both run in each precision of --precisions (default f32,bf16), and each
precision is compared with its twin: headlab f32 with PyTorch f32, headlab
`--precision bf16` (bf16 GEMM operands, f32 accumulation, everything else
f32) with PyTorch's mixed precision, the same step under
torch.autocast('cpu', dtype=torch.bfloat16) (matmuls and Linear layers in
bf16, f32 weights, LayerNorm, softmax and loss). That is PyTorch's best on
a CPU with bf16 units (AVX512_BF16, AMX-BF16); on one without, headlab
refuses bf16, oneDNN emulates it for PyTorch, and the script says so and
runs only PyTorch's bf16 twin.

Each round runs every binary and PyTorch once, in a fresh process; the
ratio to PyTorch is taken per round (so both sides of a ratio saw the same
moment of the machine), and the median of those ratios is reported with
their spread (min-max).

Where docs/performance.md sets a target for an entry (headlab's step at most
that fraction of its twin's), a line says whether it was met and what it asks
of the arithmetic: the step's FLOPs in the target's time, as a share of the
peak headlab's own process measured then (MFU: the FMA peak in f32, the bf16
units' in bf16), beside the share its step reached. A target that asks for
more than about 90% of the FMA peak cannot be met by a step that does its
arithmetic in float32 on that CPU, whatever its GEMM library.

Usage (Debian's python3 with python3-torch, not a virtualenv's):
  /usr/bin/python3 bench/compare_torch.py --headlab build/headlab
  /usr/bin/python3 bench/compare_torch.py --headlab build/headlab --presets tiny,small --threads 1,2 --rounds 3
  /usr/bin/python3 bench/compare_torch.py --headlab build/headlab --precisions f32                    # f32 only
  /usr/bin/python3 bench/compare_torch.py --headlab /tmp/headlab-before --headlab build/headlab   # old vs new
  /usr/bin/python3 bench/compare_torch.py --no-torch --env ONEDNN_MAX_CPU_ISA=AVX2 \
      --headlab build/headlab@openblas --headlab build/headlab@onednn                # backends, AVX2 only
A binary given as PATH@BACKEND runs with --gemm BACKEND.
"""
import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time

PRESETS = {  # vocab, seq_len, batch, d_model, heads, layers
    "tiny": (16, 8, 64, 64, 2, 1),
    "small": (64, 32, 32, 128, 4, 2),
    "medium": (256, 128, 16, 256, 8, 4),
}
OPENBLAS_OPENMP = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
# docs/performance.md's targets: headlab's step at most this fraction of its twin's.
TARGETS = {"f32": {"tiny": 0.25, "small": 0.35, "medium": 0.45}, "bf16": {"small": 0.5, "medium": 0.5}}


# --------------------------------------------------------------------------
# The PyTorch twin (runs in a worker process).

def torch_worker(preset, threads, warmup, steps, runs, foreach, precision):
    import resource

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    # The warm-up headlab gets (bench's process runs large GEMMs before it
    # times): one large product at this thread count.
    big = torch.randn(1024, 1024)
    for _ in range(3):
        big @ big
    torch.manual_seed(1)
    V, T, B, d, h, L = PRESETS[preset]

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

        def forward(self, x):  # [B, T, d]
            b, t, _ = x.shape
            dk = d // h
            split = lambda y: y.view(b, t, h, dk).transpose(1, 2)  # [B, h, T, dk]
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dk))
            scores = scores.masked_fill(self.mask[:t, :t], float("-inf"))
            a = scores.softmax(-1)
            return self.o((a @ v).transpose(1, 2).reshape(b, t, d))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = Attention()
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, d), nn.Embedding(T, d)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, V)
            for name, p in self.named_parameters():  # headlab's init
                if p.dim() == 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, tokens):  # [B, T] -> [B, T, V]
            x = self.tok(tokens) + self.pos.weight[: tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=foreach)
    gen = torch.Generator().manual_seed(2)

    def step():
        x = torch.randint(0, V, (B, T), generator=gen)
        y = torch.full((B, T), -1, dtype=torch.long)
        y[:, 1:] = x[:, :-1]
        opt.zero_grad(set_to_none=True)
        # bf16: PyTorch's mixed precision (autocast runs the matmuls and
        # Linear layers in bf16, keeps f32 weights, LayerNorm, softmax, loss).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, V), y.view(-1), ignore_index=-1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # what headlab's step reports: loss and accuracy
            has = y >= 0
            (logits.argmax(-1)[has] == y[has]).float().mean().item()
        return loss.item()

    for _ in range(warmup):
        step()
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        ms.append(1000 * (time.perf_counter() - t0) / steps)
    ms.sort()
    blas = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libopenblas" in line})
    # The kernels OpenBLAS picked: a CPU it does not know (and no
    # OPENBLAS_CORETYPE) can leave it on slow generic ones.
    core = []
    for path in blas:
        import ctypes
        lib = ctypes.CDLL(path)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core.append(lib.openblas_get_corename().decode())
    return {
        "preset": preset,
        "precision": precision,
        "threads": torch.get_num_threads(),
        "ms_per_step": ms[len(ms) // 2],
        "ms_per_step_min": ms[0],
        "ms_per_step_max": ms[-1],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "parameters": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "openblas": blas,
        "openblas_core": core,
    }


# --------------------------------------------------------------------------
# The driver.

def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_headlab(binary, preset, threads, a, precision):
    path, _, backend = binary.partition("@")
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in a.env)
    return run_json([path, "bench", "--preset", preset, "--threads", str(threads), "--json",
                     "--warmup-steps", str(a.warmup_steps), "--bench-steps", str(a.bench_steps), "--runs", str(a.runs),
                     "--precision", precision]
                    + (["--gemm", backend] if backend else []), env=env)


def cpu_flags():
    """The CPU's flags, as /proc/cpuinfo lists them (empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        return set()


# OpenBLAS's generic x86-64 kernels, where it lands on a CPU it does not know.
GENERIC_OPENBLAS_CORES = {"prescott", "core2", "nehalem", "atom", "katmai", "coppermine", "northwood", "banias"}


def openblas_coretype():
    """OPENBLAS_CORETYPE for PyTorch's OpenBLAS: None where the environment sets it or OpenBLAS knows the CPU."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return None
    import ctypes
    import glob
    libs = sorted(glob.glob(OPENBLAS_OPENMP + "/libopenblas*.so*"))
    if not libs:
        return None
    lib = ctypes.CDLL(libs[0])
    lib.openblas_get_corename.restype = ctypes.c_char_p
    if lib.openblas_get_corename().decode().lower() not in GENERIC_OPENBLAS_CORES:
        return None
    flags = cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def run_torch(preset, threads, a, precision):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = OPENBLAS_OPENMP + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["OMP_NUM_THREADS"] = str(threads)
    if a.openblas_coretype:
        env["OPENBLAS_CORETYPE"] = a.openblas_coretype
    return run_json([sys.executable, os.path.abspath(__file__), "--worker", preset, str(threads),
                     str(a.warmup_steps), str(a.bench_steps), str(a.runs), str(int(a.foreach)), precision], env=env)


def native_bf16():
    """Whether this CPU computes bf16 itself (AVX512_BF16 or AMX-BF16), as /proc/cpuinfo says."""
    flags = cpu_flags()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def target_line(preset, threads, name, target, ratio, mine, twins):
    """Whether `name` met its target, and the MFU the target asks for in each
    round (the step's FLOPs in target x the twin's time, over the peak this
    round's headlab process measured) beside the MFU its step reached."""
    asks = [r["gflop_per_step"] / (target * q["ms_per_step"] / 1000) / r["mfu_peak_gflops"]
            for r, q in zip(mine, twins)]
    reached = [r["mfu"] for r in mine]

    def span(xs):
        lo, hi = 100 * min(xs), 100 * max(xs)
        return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"
    return (f"{preset:6s} {threads}T {name:16s} target x{target} of its twin: {'met' if ratio <= target else 'missed'};"
            f" it asks for {span(asks)} of the {mine[0]['mfu_peak_isa']} peak (MFU, per round), the step reached "
            f"{span(reached)}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        preset, threads, warmup, steps, runs, foreach, precision = sys.argv[2:9]
        print(json.dumps(torch_worker(preset, int(threads), int(warmup), int(steps), int(runs), bool(int(foreach)),
                                      precision)))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--headlab", action="append", help="headlab binary (repeat to compare several builds)")
    p.add_argument("--presets", default="tiny,small,medium")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3, help="alternating runs per framework; the median is kept")
    p.add_argument("--warmup-steps", type=int, help="untimed steps first (default: 5, medium 2)")
    p.add_argument("--bench-steps", type=int, help="steps per timed run (default: 20, medium 5)")
    p.add_argument("--runs", type=int, default=5, help="timed runs inside one process (median)")
    p.add_argument("--foreach", type=int, default=1, help="torch AdamW foreach (multi-tensor) implementation")
    p.add_argument("--no-torch", action="store_true", help="headlab binaries only")
    p.add_argument("--precisions", "--torch-precisions", dest="precisions", default="f32,bf16",
                   help="precisions to run both frameworks in, each against its twin: f32, and bf16 = headlab "
                        "--precision bf16 against PyTorch under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--json", action="store_true", help="also print every result as JSON lines")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="set in headlab's environment (repeatable), e.g. ONEDNN_MAX_CPU_ISA=AVX2")
    a = p.parse_args()
    binaries = a.headlab or ["build/headlab"]
    for b in binaries:
        path, _, backend = b.partition("@")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            p.error(f"--headlab {path}: no executable there (build it with scripts/setup.sh)")
        if backend not in ("", "onednn", "openblas"):
            p.error(f"--headlab {b}: the backend after @ must be onednn or openblas")
    for kv in a.env:
        if "=" not in kv or kv.startswith("="):
            p.error(f"--env {kv}: expected NAME=VALUE")
    for preset in a.presets.split(","):
        if preset not in PRESETS:
            p.error(f"--presets: unknown preset '{preset}' (valid: {', '.join(PRESETS)})")
    try:
        thread_counts = [int(t) for t in a.threads.split(",")]
    except ValueError:
        thread_counts = []
    if not thread_counts or min(thread_counts) < 1:
        p.error(f"--threads {a.threads}: expected positive integers separated by commas, e.g. 2,1")
    precisions = a.precisions.split(",")
    if not precisions or any(x not in ("f32", "bf16") for x in precisions) or len(set(precisions)) < len(precisions):
        p.error(f"--precisions {a.precisions}: expected f32, bf16 or f32,bf16")
    if a.rounds < 1 or a.runs < 1:
        p.error("--rounds and --runs must be at least 1")
    if not a.no_torch and importlib.util.find_spec("torch") is None:
        p.error(f"PyTorch is not importable by {sys.executable}: install Debian's python3-torch "
                "(apt-get install python3-torch) and run this with /usr/bin/python3, or pass --no-torch")
    # headlab's entries: one per binary and precision; headlab refuses bf16
    # on a CPU without bf16 units, so there only PyTorch's (emulated) twin runs.
    suffix = {"f32": "", "bf16": "-bf16"}
    headlab_precisions = [x for x in precisions if x == "f32" or native_bf16()]
    entries = [((f"headlab[{i}]" if len(binaries) > 1 else "headlab") + suffix[x], b, x)
               for x in headlab_precisions for i, b in enumerate(binaries)]
    names = [n for n, _, _ in entries]
    twins = [] if a.no_torch else [("torch" + suffix[x], x) for x in precisions]
    twin_of = {x: t for t, x in twins}
    if not entries:
        p.error("--precisions bf16: this CPU has no bf16 units, so headlab has nothing to run (add f32)")
    if a.env:
        print(f"# headlab's environment adds {' '.join(a.env)}")
    a.openblas_coretype = None if a.no_torch else openblas_coretype()
    if a.openblas_coretype:
        print(f"# OpenBLAS does not know this CPU and would run PyTorch's f32 products on its generic SSE3 kernels: "
              f"PyTorch runs with OPENBLAS_CORETYPE={a.openblas_coretype}, the kernels its flags allow")
    load = os.getloadavg()
    print(f"# load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cpus; "
          f"rounds {a.rounds}, each of {a.runs} timed runs")
    for i, b in enumerate(binaries):
        if len(binaries) > 1:
            print(f"# headlab[{i}] = {b}")
    if "bf16" in precisions:
        print("# bf16: headlab --precision bf16; torch-bf16 = torch.autocast('cpu', dtype=torch.bfloat16); "
              + ("this CPU has native bf16 (AVX512_BF16 or AMX-BF16)" if native_bf16() else
                 "this CPU has no bf16 units (no AVX512_BF16 or AMX-BF16 in /proc/cpuinfo): headlab refuses "
                 "bf16 and PyTorch emulates it here, so torch-bf16 is not its best on a bf16 CPU"))
    rows = []
    warmup_arg, steps_arg = a.warmup_steps, a.bench_steps
    for preset in a.presets.split(","):
        # A medium step takes ~0.3-1 s: fewer steps keep a full comparison near 15 minutes.
        a.warmup_steps = warmup_arg if warmup_arg is not None else (2 if preset == "medium" else 5)
        a.bench_steps = steps_arg if steps_arg is not None else (5 if preset == "medium" else 20)
        for threads in thread_counts:
            results = {n: [] for n in names + [t for t, _ in twins]}
            for _ in range(a.rounds):  # alternate, so both see the same load
                for n, b, x in entries:
                    results[n].append(run_headlab(b, preset, threads, a, x))
                for t, precision in twins:
                    results[t].append(run_torch(preset, threads, a, precision))
            summary = {}
            for n, rs in results.items():
                summary[n] = {"ms": statistics.median(r["ms_per_step"] for r in rs),
                              "all": [round(r["ms_per_step"], 3) for r in rs],
                              "rss": max(r["peak_rss_mib"] for r in rs)}
                if a.json:
                    for r in rs:
                        print(json.dumps({"who": n, **r}))
            rows.append((preset, threads, summary, results))
            precision_of = {n: x for n, _, x in entries}
            precision_of.update({t: x for t, x in twins})
            for n, s in summary.items():
                # Each against its precision's twin (without PyTorch: the first headlab entry).
                ref_name = twin_of.get(precision_of[n], n) if twins else names[0]
                ref = summary[ref_name]

                # Per-round ratios: both sides of each were measured back to back.
                def ratio_to(other):
                    per_round = [r["ms_per_step"] / q["ms_per_step"] for r, q in zip(results[n], results[other])]
                    return statistics.median(per_round), min(per_round), max(per_round)
                s["ref"] = ref_name
                s["ratio"], s["ratio_min"], s["ratio_max"] = ratio_to(ref_name)
                rss_ratio = s["rss"] / ref["rss"]
                print(f"{preset:6s} {threads}T {n:16s} {s['ms']:9.2f} ms/step  x{s['ratio']:5.3f} of {ref_name:10s}"
                      f" ({s['ratio_min']:.3f}-{s['ratio_max']:.3f})"
                      f"  peak RSS {s['rss']:7.1f} MiB (x{rss_ratio:4.2f})   runs {s['all']}", flush=True)
                target = TARGETS.get(precision_of[n], {}).get(preset)
                if target and n in names and twins:
                    print(target_line(preset, threads, n, target, s["ratio"], results[n], results[ref_name]),
                          flush=True)
    load = os.getloadavg()
    print(f"# load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if twins:
        t = rows[0][3][twins[0][0]][0]
        print(f"# torch {t['torch']}, OpenBLAS loaded: {', '.join(t['openblas']) or 'none'}"
              f" (core {', '.join(t.get('openblas_core', [])) or '?'}; OPENBLAS_CORETYPE="
              f"{a.openblas_coretype or os.environ.get('OPENBLAS_CORETYPE', 'unset')})")
    # A Markdown table for the docs: each headlab entry's ratio to its twin.
    print()
    cols = names + [t for t, _ in twins]
    ratio_cols = [n for n in names if twins]
    print("| preset | threads | " + " | ".join([f"{c} ms/step" for c in cols] +
                                               [f"{c} / {rows[0][2][c]['ref']}" for c in ratio_cols] +
                                               [f"{c} peak RSS MiB" for c in cols]) + " |")
    print("|---" * (2 + len(cols) * 2 + len(ratio_cols)) + "|")
    for preset, threads, s, _ in rows:
        cells = [f"{s[c]['ms']:.2f}" for c in cols]
        ratio = ["{:.3f} ({:.2f}-{:.2f})".format(s[c]["ratio"], s[c]["ratio_min"], s[c]["ratio_max"])
                 for c in ratio_cols]
        rss = [f"{s[c]['rss']:.1f}" for c in cols]
        print(f"| {preset} | {threads} | " + " | ".join(cells + ratio + rss) + " |")


if __name__ == "__main__":
    main()
