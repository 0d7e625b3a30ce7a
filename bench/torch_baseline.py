#!/usr/bin/python3
"""PyTorch CPU baseline for the `eggroll bench` forward suite.

For bias-free float32 ReLU MLPs (small 4-256-2, medium 64-512-64, large 256-2048-256) this
measures, at population N, rank r and R rows per member (ALGORITHM.md 1.1 and 4):

  inference  plain batched inference of the unperturbed MLP on x of shape (N*R, in):
             one F.linear (SGEMM) per layer over all members' rows;
  eggroll    the EGGROLL perturbed forward: per layer
                 y = x W^T + (sigma/sqrt(r)) * s_i * ((x_i B_i) A_i^T)    for member i,
             x W^T as the same single GEMM, the correction with torch.bmm / baddbmm on
             batched views of the rows. Members 2k and 2k+1 are an antithetic pair that shares
             factors A_k (m x r), B_k (n x r) with signs s = +1 / -1. Because their rows are
             adjacent, the (N, R, n) per-member view is regrouped as (N/2, 2R, n): one bmm per
             pair computes both members' x_i B_k, the sign is applied to that small (2R x r)
             product, and one baddbmm adds (.) A_k^T into y in place. A_k is stored transposed,
             (N/2, r, m), which is the same normal draw in the layout bmm reads fastest.
             noise = "table":     all factors drawn once before timing (pre-generated);
             noise = "generator": factors drawn inside the timed region by torch.randn on every
                                  forward (torch's CPU generator, mt19937 + Box-Muller).

Reported per configuration: rows/s of both, ratio = eggroll / inference, G multiply-adds/s of
the plain inference (rows * sum(m*n) per second) and its fraction of --peak-gmacs.

Protocol (DESIGN.md "Benchmark protocol"): for each (model, N, R) all variants (inference and
eggroll for every rank and noise source) run interleaved, in a rotating order, after a warm-up
that also sizes each repetition to at least --min-rep-s; the median of --reps repetitions is
reported. Ratios therefore come from one process and interleaved timings.

Running it (Debian's python3-torch is installed for /usr/bin/python3, not for other pythons):

  /usr/bin/python3 bench/torch_baseline.py --quick                       # a short subset
  /usr/bin/python3 bench/torch_baseline.py --json /tmp/torch_forward.json   # full default sweep

OpenBLAS core type. Debian's OpenBLAS is built with DYNAMIC_ARCH: it picks its kernels at load
time from the CPU, or from the environment variable OPENBLAS_CORETYPE, which must therefore be
set before the process starts:

  /usr/bin/python3 bench/torch_baseline.py --quick                          # auto-detected core
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_baseline.py --quick   # AVX-512 kernels

or let the script run both, alternating child processes model by model, check the outputs of
one against the other numerically and report which is faster:

  /usr/bin/python3 bench/torch_baseline.py --coretypes default,SkylakeX --json out.json

Which BLAS torch uses: Debian's torch is built with BLAS_INFO=generic and links libblas.so.3,
which the alternatives system points at the reference BLAS or an OpenBLAS build. Check with
  update-alternatives --display libblas.so.3-x86_64-linux-gnu
and, if it points at .../blas/libblas.so.3 (reference BLAS, far slower), switch (as root) with
  update-alternatives --set libblas.so.3-x86_64-linux-gnu \\
      /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
(or openblas-pthread). The script reads the library actually mapped into the process from
/proc/self/maps and asks OpenBLAS (openblas_get_corename, openblas_get_config) what it runs.
"""

import argparse
import ctypes
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

# Layer widths of the benchmark models: (in, hidden, out).
MODELS = {
    "small": (4, 256, 2),
    "medium": (64, 512, 64),
    "large": (256, 2048, 256),
}

BLAS_ALTERNATIVE = "libblas.so.3-x86_64-linux-gnu"


# --------------------------------------------------------------------------------------------
# Models and forwards
# --------------------------------------------------------------------------------------------

def make_weights(dims, gen):
    """Bias-free MLP weights W_l of shape (m, n) = (out, in), scaled to keep activations O(1)."""
    return [torch.randn(m, n, generator=gen) / math.sqrt(n) for n, m in zip(dims[:-1], dims[1:])]


def macs_per_row(dims):
    """Multiply-adds of one row through the plain MLP: sum of m*n over layers."""
    return sum(n * m for n, m in zip(dims[:-1], dims[1:]))


def inference_forward(x, weights):
    """Plain batched inference: one GEMM per layer over all rows, ReLU between layers."""
    h = x
    last = len(weights) - 1
    for l, w in enumerate(weights):
        h = F.linear(h, w)
        if l < last:
            h = torch.relu_(h)
    return h


class FactorSet:
    """Low-rank factors of every layer for P antithetic pairs, carved from one flat buffer.

    Layer l (W of shape m x n) gets B of shape (P, n, r) and A^T of shape (P, r, m). draw() refills
    the whole buffer with torch.randn (writing into the existing storage, so the timed
    "generator" variant measures the draw, not an allocation).
    """

    def __init__(self, pairs, rank, dims):
        self.pairs, self.rank = pairs, rank
        sizes = [(n, m) for n, m in zip(dims[:-1], dims[1:])]
        total = sum(pairs * rank * (n + m) for n, m in sizes)
        self.flat = torch.empty(total)
        self.layers = []
        offset = 0
        for n, m in sizes:
            b = self.flat[offset:offset + pairs * n * rank].view(pairs, n, rank)
            offset += pairs * n * rank
            at = self.flat[offset:offset + pairs * rank * m].view(pairs, rank, m)
            offset += pairs * rank * m
            self.layers.append((b, at))

    def draw(self, gen=None):
        torch.randn(self.flat.shape, out=self.flat, generator=gen)
        return self


def pair_signs(rows_per_member, rank, sigma):
    """(1, 2R, 1) multiplier: +sigma/sqrt(r) on the first member of a pair, - on the second."""
    c = sigma / math.sqrt(rank)
    s = torch.full((2 * rows_per_member,), c)
    s[rows_per_member:] = -c
    return s.view(1, 2 * rows_per_member, 1)


def eggroll_forward(x, weights, factors, signs):
    """EGGROLL perturbed forward of all N members; x is (N*R, in), member i owning rows
    i*R .. i*R+R-1, so pair k owns the 2R contiguous rows of members 2k and 2k+1."""
    h = x
    pairs = factors.pairs
    last = len(weights) - 1
    for l, (w, (b, at)) in enumerate(zip(weights, factors.layers)):
        m, n = w.shape
        y = F.linear(h, w)                              # (N*R, m): the shared big GEMM
        t = torch.bmm(h.view(pairs, -1, n), b)          # (P, 2R, r): x_i B_k for both members
        t.mul_(signs)                                   # s_i * sigma / sqrt(r)
        y.view(pairs, -1, m).baddbmm_(t, at)            # y += (.) A_k^T, in place
        h = torch.relu_(y) if l < last else y
    return h


def explicit_reference(x, weights, factors, rows_per_member, rank, sigma):
    """Slow check: form every member's W_i = W + s_i sigma/sqrt(r) A_i B_i^T and run it alone."""
    n_members = 2 * factors.pairs
    outs = []
    for i in range(n_members):
        k, s = i // 2, (1.0 if i % 2 == 0 else -1.0)
        h = x[i * rows_per_member:(i + 1) * rows_per_member].double()
        for l, (w, (b, at)) in enumerate(zip(weights, factors.layers)):
            wi = w.double() + s * sigma / math.sqrt(rank) * (at[k].T.double() @ b[k].T.double())
            h = h @ wi.T
            if l < len(weights) - 1:
                h = torch.relu(h)
        outs.append(h)
    return torch.cat(outs)


def self_check(sigma, gen):
    """Check eggroll_forward against the explicit per-member formula on small shapes."""
    worst = 0.0
    for name, dims in MODELS.items():
        weights = make_weights(dims, gen)
        for rank, rows in ((1, 1), (4, 3)):
            pairs = 4
            x = torch.randn(2 * pairs * rows, dims[0], generator=gen)
            fs = FactorSet(pairs, rank, dims).draw(gen)
            got = eggroll_forward(x, weights, fs, pair_signs(rows, rank, sigma)).double()
            ref = explicit_reference(x, weights, fs, rows, rank, sigma)
            err = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
            worst = max(worst, err)
            if err > 1e-4:
                raise SystemExit(f"self-check FAILED: {name} r={rank} R={rows}: rel err {err:.3g}")
    return worst


def fingerprint(sigma, seed):
    """Fixed-seed outputs of both forwards per model, for comparing BLAS builds / core types."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, dims in MODELS.items():
        weights = make_weights(dims, gen)
        pairs, rows, rank = 128, 4, 4
        x = torch.randn(2 * pairs * rows, dims[0], generator=gen)
        fs = FactorSet(pairs, rank, dims).draw(gen)
        out[name + "/inference"] = inference_forward(x, weights)
        out[name + "/eggroll"] = eggroll_forward(x, weights, fs, pair_signs(rows, rank, sigma))
    return out


# --------------------------------------------------------------------------------------------
# Machine and library description
# --------------------------------------------------------------------------------------------

def mapped_blas_libraries():
    """Paths of BLAS-like shared objects mapped into this process (call after a matmul)."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and ("blas" in parts[-1].lower() or "lapack" in parts[-1].lower()):
                paths.add(parts[-1])
    return sorted(paths)


def openblas_handle(paths):
    """ctypes handle of the mapped OpenBLAS (the library that exports openblas_get_corename)."""
    # Prefer the real libopenblas*.so, then the libblas.so.3 wrapper of an OpenBLAS build.
    for p in sorted(paths, key=lambda p: "openblas" not in os.path.basename(p)):
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        if hasattr(lib, "openblas_get_corename"):
            return lib, p
    return None, None


def blas_alternative():
    """Where Debian's libblas.so.3 alternative points (None when there is none)."""
    link = f"/etc/alternatives/{BLAS_ALTERNATIVE}"
    return os.path.realpath(link) if os.path.lexists(link) else None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_simd():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        flags = []
    for level in ("avx512f", "avx2", "sse4_2"):
        if level in flags:
            return level + (" +vnni" if "avx512_vnni" in flags else "")
    return "unknown"


def loadavg():
    """1-minute load average (other processes on a shared machine distort the timings)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def sgemm_gmacs(size=1024, reps=5):
    """A large square SGEMM's G multiply-adds/s (median), as a reference for this machine."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return size ** 3 / statistics.median(times) / 1e9


def set_threads(threads):
    """torch's intra-op pool and, where the library allows it, OpenBLAS's own pool."""
    torch.set_num_threads(threads)
    torch.randn(64, 64) @ torch.randn(64, 64)           # make sure BLAS is loaded and mapped
    lib, _ = openblas_handle(mapped_blas_libraries())
    if lib is not None and hasattr(lib, "openblas_set_num_threads"):
        lib.openblas_set_num_threads(ctypes.c_int(threads))


def machine_info(threads):
    torch.randn(64, 64) @ torch.randn(64, 64)           # make sure BLAS is loaded and mapped
    paths = mapped_blas_libraries()
    lib, lib_path = openblas_handle(paths)
    corename = config = None
    blas_threads = None
    if lib is not None:
        lib.openblas_get_corename.restype = ctypes.c_char_p
        corename = lib.openblas_get_corename().decode()
        if hasattr(lib, "openblas_get_config"):
            lib.openblas_get_config.restype = ctypes.c_char_p
            config = lib.openblas_get_config().decode()
        if hasattr(lib, "openblas_get_num_threads"):
            blas_threads = lib.openblas_get_num_threads()
    show = torch.__config__.show()
    blas_info = next((tok.split("=", 1)[1].rstrip(",") for tok in show.split()
                      if tok.startswith("BLAS_INFO=")), "unknown")
    alt = blas_alternative()
    if lib is not None:
        backend = "openblas"
    elif any("/blas/" in p for p in paths):
        backend = "reference"
    else:
        backend = "unknown"
    return {
        "torch_version": torch.__version__,
        "torch_blas_info": blas_info,
        "blas_backend": backend,
        "blas_libraries": paths,
        "openblas_library": lib_path,
        "openblas_corename": corename,
        "openblas_config": config,
        "openblas_threads": blas_threads,
        "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", "default"),
        "blas_alternative": alt,
        "cpu": cpu_model(),
        "simd": cpu_simd(),
        "cpus_online": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
    }


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------

def time_calls(fn, iters):
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def bench_group(dims, weights, population, rows, ranks, sigma, reps, min_rep_s, gen):
    """Time inference and every (rank, noise) eggroll variant for one (model, N, R), interleaved.
    Returns ({variant key: median seconds per forward}, {variant key: fastest repetition})."""
    pairs = population // 2
    x = torch.randn(population * rows, dims[0], generator=gen)
    variants = {("inference", None, None): lambda: inference_forward(x, weights)}
    for r in ranks:
        table = FactorSet(pairs, r, dims).draw(gen)      # pre-generated, outside the timing
        fresh = FactorSet(pairs, r, dims)               # refilled inside every timed forward
        signs = pair_signs(rows, r, sigma)
        variants[("eggroll", r, "table")] = (
            lambda t=table, s=signs: eggroll_forward(x, weights, t, s))
        variants[("eggroll", r, "generator")] = (
            lambda f=fresh, s=signs: eggroll_forward(x, weights, f.draw(), s))

    # Warm-up (two calls each), then size each variant's repetition to at least min_rep_s.
    iters = {}
    for key, fn in variants.items():
        fn()
        iters[key] = max(1, math.ceil(min_rep_s / time_calls(fn, 1)))

    samples = {key: [] for key in variants}
    keys = list(variants)
    for rep in range(reps):
        shift = rep % len(keys)                          # rotate the order every repetition
        for key in keys[shift:] + keys[:shift]:
            samples[key].append(time_calls(variants[key], iters[key]))
    return ({key: statistics.median(v) for key, v in samples.items()},
            {key: min(v) for key, v in samples.items()})


def run_sweep(args):
    set_threads(args.threads)
    info = machine_info(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    if not args.no_check:
        err = self_check(args.sigma, gen)
        print(f"self-check vs explicit per-member W_i: max rel err {err:.2e} (ok)")
    info["sgemm1024_gmacs"] = round(sgemm_gmacs(), 2)
    print_info(info)

    records = []
    for model in args.models:
        dims = MODELS[model]
        weights = make_weights(dims, gen)
        macs = macs_per_row(dims)
        for population in args.populations:
            for rows in args.rows:
                med, best = bench_group(dims, weights, population, rows, args.ranks, args.sigma,
                                  args.reps, args.min_rep_s, gen)
                inf_rps = population * rows / med[("inference", None, None)]
                inf_best = population * rows / best[("inference", None, None)]
                load = loadavg()
                for r in args.ranks:
                    for noise in ("table", "generator"):
                        egg_rps = population * rows / med[("eggroll", r, noise)]
                        egg_best = population * rows / best[("eggroll", r, noise)]
                        gm = inf_rps * macs / 1e9
                        rec = {
                            "suite": "torch_forward", "model": model, "dtype": "float32",
                            "population": population, "rank": r, "rows_per_member": rows,
                            "noise": noise,
                            "inference_rows_per_s": round(inf_rps, 1),
                            "eggroll_rows_per_s": round(egg_rps, 1),
                            "ratio": round(egg_rps / inf_rps, 4),
                            "gmacs": round(gm, 3),
                            "peak_fraction": round(gm / args.peak_gmacs, 4),
                            "peak_gmacs": args.peak_gmacs,
                            # Fastest repetition: closer to the uncontended speed when
                            # other jobs share the cores (the medians above are the result).
                            "inference_rows_per_s_best": round(inf_best, 1),
                            "eggroll_rows_per_s_best": round(egg_best, 1),
                            "reps": args.reps,
                            "loadavg": load,
                        }
                        rec.update(info)
                        records.append(rec)
                        print_row(rec)
                sys.stdout.flush()
    return records


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

HEADER = (f"{'model':<7} {'N':>5} {'r':>2} {'R':>3} {'noise':<9} {'infer rows/s':>13} "
          f"{'eggroll rows/s':>15} {'ratio':>6} {'GMAC/s':>7} {'peak':>6} {'load':>5}")


def print_info(info):
    print(f"torch {info['torch_version']} (BLAS_INFO={info['torch_blas_info']}), "
          f"threads {info['threads']}, cpu: {info['cpu']} ({info['simd']})")
    print(f"BLAS: {info['blas_backend']}  mapped: {', '.join(info['blas_libraries'])}")
    print(f"alternative {BLAS_ALTERNATIVE} -> {info['blas_alternative']}")
    if info["blas_backend"] == "openblas":
        print(f"OpenBLAS core: {info['openblas_corename']} "
              f"(OPENBLAS_CORETYPE={info['openblas_coretype_env']}); "
              f"config: {info['openblas_config']}; threads {info['openblas_threads']}")
    elif info["blas_backend"] == "reference":
        print("WARNING: torch runs on the reference BLAS. Switch (as root) with\n"
              f"  update-alternatives --set {BLAS_ALTERNATIVE} "
              "/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3")
    print(f"SGEMM 1024^3: {info['sgemm1024_gmacs']:.1f} GMAC/s")
    print(HEADER)
    sys.stdout.flush()


def print_row(rec):
    print(f"{rec['model']:<7} {rec['population']:>5} {rec['rank']:>2} "
          f"{rec['rows_per_member']:>3} {rec['noise']:<9} {rec['inference_rows_per_s']:>13.4g} "
          f"{rec['eggroll_rows_per_s']:>15.4g} {rec['ratio']:>6.3f} {rec['gmacs']:>7.2f} "
          f"{100 * rec['peak_fraction']:>5.1f}% {rec['loadavg']:>5.2f}")


# --------------------------------------------------------------------------------------------
# Core-type comparison: child processes with different OPENBLAS_CORETYPE
# --------------------------------------------------------------------------------------------

def child_argv(args, model, json_path, fp_path):
    argv = [sys.executable, os.path.abspath(__file__),
            "--models", model,
            "--populations", *map(str, args.populations),
            "--ranks", *map(str, args.ranks),
            "--rows", *map(str, args.rows),
            "--threads", str(args.threads), "--reps", str(args.reps),
            "--min-rep-s", str(args.min_rep_s), "--sigma", str(args.sigma),
            "--peak-gmacs", str(args.peak_gmacs), "--seed", str(args.seed),
            "--json", json_path, "--fingerprint", fp_path]
    if args.no_check:
        argv.append("--no-check")
    return argv


def run_coretypes(args):
    """Alternate child runs per model over the core types, compare outputs and speeds."""
    coretypes = args.coretypes
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for ct in coretypes:
                env = dict(os.environ)
                env.pop("OPENBLAS_CORETYPE", None)
                if ct != "default":
                    env["OPENBLAS_CORETYPE"] = ct
                jp = os.path.join(tmp, f"{model}-{ct}.json")
                fp = os.path.join(tmp, f"fp-{ct}.pt")
                print(f"\n=== {model}, OPENBLAS_CORETYPE={ct}")
                sys.stdout.flush()
                subprocess.run(child_argv(args, model, jp, fp), env=env, check=True)
                with open(jp) as f:
                    records.extend(json.load(f))

        # Numerical check of every core type against the first one.
        base = torch.load(os.path.join(tmp, f"fp-{coretypes[0]}.pt"))
        print(f"\nnumerical check against OPENBLAS_CORETYPE={coretypes[0]} "
              "(fixed-seed outputs, N=256, R=4, r=4):")
        max_err = {coretypes[0]: 0.0}
        for ct in coretypes[1:]:
            other = torch.load(os.path.join(tmp, f"fp-{ct}.pt"))
            worst = 0.0
            for key, ref in base.items():
                err = ((other[key] - ref).abs().max() / ref.abs().max()).item()
                worst = max(worst, err)
                print(f"  {ct:<10} {key:<18} max rel diff {err:.2e}")
            max_err[ct] = worst

    # Speed summary: geometric mean over configurations of each core type's rows/s relative to
    # the first; the fastest core type whose outputs agree (max rel diff < 1e-4) is recommended.
    def index(recs):
        return {(r["model"], r["population"], r["rank"], r["rows_per_member"], r["noise"]): r
                for r in recs}
    by_ct = {ct: index([r for r in records if r["openblas_coretype_env"] == ct])
             for ct in coretypes}
    base_idx = by_ct[coretypes[0]]
    print("\nspeed relative to " + coretypes[0] + " (geometric mean over configurations):")
    score = {}
    for ct in coretypes:
        rel_inf = [by_ct[ct][k]["inference_rows_per_s"] / base_idx[k]["inference_rows_per_s"]
                   for k in base_idx if k in by_ct[ct]]
        rel_egg = [by_ct[ct][k]["eggroll_rows_per_s"] / base_idx[k]["eggroll_rows_per_s"]
                   for k in base_idx if k in by_ct[ct]]
        gi = math.exp(statistics.fmean(map(math.log, rel_inf)))
        ge = math.exp(statistics.fmean(map(math.log, rel_egg)))
        score[ct] = gi
        core = next(iter(by_ct[ct].values()))["openblas_corename"]
        print(f"  {ct:<10} (core {core}): inference x{gi:.3f}, eggroll x{ge:.3f}, "
              f"max rel diff {max_err[ct]:.1e}")
    ok = [ct for ct in coretypes if max_err[ct] < 1e-4]
    best = max(ok, key=lambda ct: score[ct])
    print(f"fastest correct core type: {best}")
    for r in records:
        r["coretype_selected"] = best
    return records


# --------------------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(
        description="PyTorch baseline for the eggroll forward suite (plain inference vs "
                    "EGGROLL low-rank perturbed forward).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    p.add_argument("--populations", nargs="+", type=int, default=None,
                   help="population sizes N (even); default 256 1024 4096, --quick 1024 4096")
    p.add_argument("--ranks", nargs="+", type=int, default=[1, 4])
    p.add_argument("--rows", nargs="+", type=int, default=None,
                   help="rows per member R; default 1 16, --quick 1")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (and OpenBLAS)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions (median reported)")
    p.add_argument("--min-rep-s", type=float, default=None,
                   help="minimum seconds per repetition; default 0.05, --quick 0.02")
    p.add_argument("--sigma", type=float, default=0.01)
    p.add_argument("--peak-gmacs", type=float, default=229.0,
                   help="machine peak in G multiply-adds/s (fp32 FMA) for peak_fraction")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a short subset of the sweep")
    p.add_argument("--no-check", action="store_true",
                   help="skip the self-check against explicitly formed W_i")
    p.add_argument("--json", metavar="FILE", help="write the records as a JSON list")
    p.add_argument("--coretypes", type=lambda s: s.split(","), metavar="LIST",
                   help="comma-separated OPENBLAS_CORETYPE values ('default' = unset) to run "
                        "in alternating child processes and compare, e.g. default,SkylakeX")
    p.add_argument("--fingerprint", metavar="FILE", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.populations is None:
        args.populations = [1024, 4096] if args.quick else [256, 1024, 4096]
    if args.rows is None:
        args.rows = [1] if args.quick else [1, 16]
    if args.min_rep_s is None:
        args.min_rep_s = 0.02 if args.quick else 0.05
    if any(n < 2 or n % 2 for n in args.populations):
        p.error("populations must be even (antithetic pairs)")
    if any(r < 1 for r in args.ranks + args.rows) or args.threads < 1 or args.reps < 1:
        p.error("ranks, rows, threads and reps must be positive")
    return args


def main():
    args = parse_args()
    if args.coretypes:
        records = run_coretypes(args)
    else:
        records = run_sweep(args)
        if args.fingerprint:
            torch.save(fingerprint(args.sigma, args.seed), args.fingerprint)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
        print(f"wrote {len(records)} records to {args.json}")


if __name__ == "__main__":
    main()
