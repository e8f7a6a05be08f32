"""Where sustained attention time goes at the power cap: tessera's forward (or backward, "bwd")
and SDPA-cuDNN's on the same tensors (as head_to_head_attention.py), each run back to back for
4 s after a 2 s rest, the other one alternating, two rounds, while nvidia-smi samples the board
every 50 ms. For the last 3 s of each run: ms a call, mean power (W), mean SM clock (MHz) and
energy a call (mJ). A kernel that runs slower sustained than from rest at the same work is
clocked down by the power cap; its energy a call says how much less of it a peer needs.
    PYTHONPATH=<build-python>/python:bench python3 bench/power_attention.py OUT [bwd] [f16|bf16] [D:N ...]"""
import json
import subprocess
import sys
import threading
import time

import torch

from head_to_head_attention import cases


class Sampler:
    """nvidia-smi's power draw and SM clock, each line stamped when it arrives."""

    def __init__(self):
        self.samples = []
        self.process = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=power.draw.instant,clocks.sm", "--format=csv,noheader,nounits", "-lms", "50"],
            stdout=subprocess.PIPE, text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            try:
                power, clock = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.time(), power, clock))

    def between(self, start, end):
        inside = [(p, c) for t, p, c in self.samples if start <= t <= end]
        if not inside:
            return float("nan"), float("nan")
        return sum(p for p, _ in inside) / len(inside), sum(c for _, c in inside) / len(inside)

    def stop(self):
        self.process.terminate()


def run_for(fn, seconds):
    """Calls fn back to back for `seconds`; (ms a call over the last 3 s, that window)."""
    start = time.time()
    while time.time() - start < seconds - 3:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    window, calls = time.time(), 0
    while time.time() - window < 3:
        for _ in range(20):
            fn()
        calls += 20
        torch.cuda.synchronize()
    end = time.time()
    return (end - window) * 1e3 / calls, (window, end)


def main():
    out = open(sys.argv[1], "a")
    gpu = torch.cuda.get_device_name()
    sampler = Sampler()
    print(f"{'dtype':5s} {'D':>4s} {'N':>6s} {'causal':6s} mode {'provider':8s} {'ms':>7s} {'W':>6s} {'MHz':>6s} "
          f"{'mJ/call':>8s}")
    for case, calls in cases(sys.argv[2:]):
        for _ in range(2):
            for name, run in calls.items():
                time.sleep(2)
                ms, (start, end) = run_for(run, 4)
                watts, mhz = sampler.between(start, end)
                print(f"{case['dtype']:5s} {case['D']:4d} {case['N']:6d} {case['causal']!s:6s} {case['mode']} "
                      f"{name:8s} {ms:7.3f} {watts:6.0f} {mhz:6.0f} {watts * ms:8.1f}", flush=True)
                out.write(json.dumps({"kind": "attn_power", **case, "provider": name, "ms": ms, "watts": watts,
                                      "sm_mhz": mhz, "mj_per_call": watts * ms, "gpu": gpu}) + "\n")
                out.flush()
    sampler.stop()


if __name__ == "__main__":
    main()
