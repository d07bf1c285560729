"""GPU check for the Triton kernels: correctness against torch, then bandwidth and GEMM throughput.

Run on a machine with a CUDA GPU, torch and triton:  python benchmarks/gpu_check.py [--json PATH]
Without a CUDA device it prints why and exits with code 2 (nothing was checked).

What it reports (device-resident data, triton.testing.do_bench medians, in ms -> units):
  1. correctness: Triton bias+GELU and GEMM(+bias+GELU) vs torch on ragged shapes (1823x781...);
  2. device copy bandwidth (x.copy_ into y; reads + writes 8 bytes per float32) = the ceiling;
  3. bias+GELU GB/s for Triton and torch (reads 4MN + 4N, writes 4MN), as a fraction of (2);
  4. GEMM TFLOP/s (2MNK) for Triton (fused epilogue and plain) vs torch.matmul, fp32 "ieee" and tf32;
  5. apart from all of that: NumPy-in/NumPy-out times, which include the host<->device copies.
Exit code: 0 when every correctness check passed, 1 otherwise, 2 without a GPU.

The one documented exception to tinytorch.profiling's timing policy: on the GPU, kernels are timed
by triton.testing.do_bench (CUDA events around launches on a flushed L2), which the CPU policy
cannot do. Flops and bytes still come from tinytorch.profiling.problems; the dry run and the
NumPy round trip time with profiling.per_call.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tinytorch import profiling
from tinytorch.profiling import per_call


def _no_gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "triton is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--size", type=int, default=4096, help="GEMM and bias+GELU size (N x N)")
    parser.add_argument(
        "--cpu-interpreter",
        action="store_true",
        help="dry run of this script on the CPU (TRITON_INTERPRET=1, tiny sizes, wall-clock timer): "
        "proves the script itself works where no GPU is at hand; its figures mean nothing",
    )
    args = parser.parse_args(argv)
    dry = args.cpu_interpreter
    if dry:
        import os

        os.environ["TRITON_INTERPRET"] = "1"  # before triton_kernels defines its kernels
        args.size = min(args.size, 64)

    reason = None if dry else _no_gpu_reason()
    if reason:
        print(f"gpu_check: no CUDA GPU to check on ({reason}); nothing was run.")
        return 2

    import torch
    from tinytorch.extensions import triton_kernels as tk

    if dry:

        def do_bench(fn: Any) -> float:
            """Wall-clock ms of one call: the interpreter's timings mean nothing anyway."""
            return per_call(fn, warmup=0, min_time=0.0, min_calls=1, max_calls=1).min * 1e3
    else:
        from triton.testing import do_bench

    ok, why = tk.available()
    if not ok:
        print(f"gpu_check: Triton kernels unavailable: {why}")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be true fp32
    dev = "cpu" if dry else "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    name = "CPU (Triton interpreter dry run)" if dry else torch.cuda.get_device_name(0)
    report: dict[str, Any] = {"device": name, "backend": why}
    print(f"device: {report['device']}  ({why})")

    def gelu_ref(y: Any) -> Any:
        return torch.nn.functional.gelu(y.double(), approximate="tanh").float()

    # 1. correctness on ragged shapes --------------------------------------------------------
    checks = []
    gelu_shapes = [(37, 300), (1, 1)] if dry else [(1823, 781), (1, 1), (4097, 33), (64, 4096)]
    gemm_shapes = [(37, 45, 29), (1, 1, 1)] if dry else [
        (1823, 781, 517), (1, 1, 1), (257, 1031, 129), (4096, 64, 4096)
    ]  # fmt: skip
    for m, n in gelu_shapes:
        x = torch.randn(m, n, device=dev, generator=gen) * 4
        bias = torch.randn(n, device=dev, generator=gen)
        err = (tk.fused_bias_gelu(x, bias) - gelu_ref(x + bias)).abs().max().item()
        checks.append({"check": f"bias_gelu {m}x{n}", "max_abs_err": err, "ok": err <= 2e-6})
    for m, k, n in gemm_shapes:
        a = torch.randn(m, k, device=dev, generator=gen)
        b = torch.randn(k, n, device=dev, generator=gen) / k**0.5
        bias = torch.randn(n, device=dev, generator=gen)
        ref = a.double() @ b.double()
        for name, got, want in [
            ("gemm", tk.matmul(a, b), ref),
            ("gemm+bias+gelu", tk.matmul_bias_gelu(a, b, bias), gelu_ref(ref + bias)),
        ]:
            err = (got.double() - want.double()).abs().max().item()
            checks.append({"check": f"{name} {m}x{k}x{n}", "max_abs_err": err, "ok": err <= 1e-3})
    report["checks"] = checks
    for c in checks:
        print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['check']:<28} max err {c['max_abs_err']:.2e}")

    # 2-3. bandwidth ----------------------------------------------------------------------------
    s = args.size
    x = torch.randn(s, s, device=dev, generator=gen)
    y = torch.empty_like(x)
    bias = torch.randn(s, device=dev, generator=gen)
    copy_ms = do_bench(lambda: y.copy_(x))
    copy_gbs = 2 * x.numel() * 4 / copy_ms / 1e6  # ms -> GB/s
    gelu_bytes = profiling.bias_gelu(s, s).bytes  # reads x and bias, writes y
    tri_ms = do_bench(lambda: tk.fused_bias_gelu(x, bias))
    torch_ms = do_bench(lambda: torch.nn.functional.gelu(x + bias, approximate="tanh"))
    report["bandwidth"] = {
        "copy_gbs": copy_gbs,
        "triton_bias_gelu_gbs": gelu_bytes / tri_ms / 1e6,
        "torch_bias_gelu_gbs": gelu_bytes / torch_ms / 1e6,
    }
    bw = report["bandwidth"]
    print(f"\ndevice copy: {copy_gbs:.0f} GB/s")
    for key in ("triton_bias_gelu_gbs", "torch_bias_gelu_gbs"):
        print(f"  {key:<22} {bw[key]:7.0f} GB/s  ({bw[key] / copy_gbs:.2f} of copy)")

    # 4. GEMM -----------------------------------------------------------------------------------
    a = torch.randn(s, s, device=dev, generator=gen)
    b = torch.randn(s, s, device=dev, generator=gen)
    flops = profiling.gemm(s).flops
    gemm: dict[str, float] = {}
    best_config: dict[str, str] = {}
    configs = [(64, 64, 32, 4, 3), (128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (128, 256, 32, 8, 3)]
    configs = configs[:2] if dry else configs
    for precision in ("ieee", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        gemm[f"torch.matmul {precision}"] = flops / do_bench(lambda: a @ b) / 1e9
        best = 0.0
        for bm, bn, bk, warps, stages in configs:
            try:
                ms = do_bench(
                    lambda bm=bm, bn=bn, bk=bk, w=warps, st=stages, p=precision: tk.matmul_bias_gelu(
                        a, b, bias, block_m=bm, block_n=bn, block_k=bk, precision=p,
                        num_warps=w, num_stages=st,
                    )
                )  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory for a config
                print(f"  config {bm}x{bn}x{bk} w{warps} s{stages} failed: {exc}")
                continue
            tflops = flops / ms / 1e9
            if tflops > best:
                best, best_config[precision] = tflops, f"{bm}x{bn}x{bk} w{warps} s{stages}"
        gemm[f"triton gemm+bias+gelu {precision}"] = best
        gemm[f"torch matmul+bias+gelu {precision}"] = flops / do_bench(
            lambda: torch.nn.functional.gelu(a @ b + bias, approximate="tanh")
        ) / 1e9  # fmt: skip
    torch.backends.cuda.matmul.allow_tf32 = False
    report["gemm_tflops"], report["triton_best_config"] = gemm, best_config
    print(f"\nGEMM {s}x{s}x{s}, TFLOP/s (device-resident)")
    for key, val in report["gemm_tflops"].items():
        print(f"  {key:<34} {val:8.1f}")

    # 5. transfer-inclusive, reported apart -----------------------------------------------------
    an, bn_, biasn = a.cpu().numpy(), b.cpu().numpy(), bias.cpu().numpy()
    total = per_call(
        lambda: tk.matmul_bias_gelu(an, bn_, biasn),
        warmup=1,
        min_time=0.0,
        min_calls=1,
        max_calls=1,
    ).min
    report["numpy_roundtrip_gemm_s"] = total
    print(
        f"\nNumPy in/out GEMM+bias+GELU {s}: {total * 1e3:.1f} ms (includes host<->device copies)"
    )

    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0 if all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
