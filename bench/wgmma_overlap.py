"""Whether a kernel's loops compute while their wgmma run: for each innermost loop of each
cubin (or PTX, assembled for sm_90a first) that issues wgmma (HGMMA), its instruction count,
its special-function ops (MUFU: softmax's exp2) and how many of them run while the loop's last
wgmma may be in flight: after it and before a wait for every wgmma (WARPGROUP.DEPBAR.LE gsb0,
0x0), going round the loop. None means the exponentials wait for the product issued before
them: the softmax does not overlap it.
Needs ptxas and cuobjdump (CUDA toolkit, or pip's nvidia-cuda-cuobjdump; CUOBJDUMP=path).
No GPU: it reads what ptxas made of the code.
    python3 bench/wgmma_overlap.py DIR/attention_fwd.f16.d64.aligned.ptx ...
(tessera-examples --ptx DIR [--only TEXT] [--set KEY=VALUE] writes the shipped kernels' PTX.)"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def sass_of(path):
    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    if path.endswith(".ptx"):
        with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
            subprocess.run(["ptxas", "-arch=sm_90a", path, "-o", cubin.name], check=True)
            return subprocess.run([cuobjdump, "-sass", cubin.name], check=True, capture_output=True, text=True).stdout
    return subprocess.run([cuobjdump, "-sass", path], check=True, capture_output=True, text=True).stdout


def innermost_loops(sass):
    """(instructions) of each backward branch's span that holds no other backward branch."""
    code = [(int(m.group(1), 16), m.group(2)) for m in
            (re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line) for line in sass.splitlines()) if m]
    index = {address: i for i, (address, _) in enumerate(code)}
    spans = []
    for i, (address, text) in enumerate(code):
        target = re.search(r"\bBRA (0x[0-9a-f]+)", text)
        if target and int(target.group(1), 16) < address and int(target.group(1), 16) in index:
            spans.append((index[int(target.group(1), 16)], i))
    inner = [(a, b) for a, b in spans if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in spans)]
    return [[text for _, text in code[a:b + 1]] for a, b in inner]


def main():
    for path in sys.argv[1:]:
        for body in innermost_loops(sass_of(path)):
            if not any(t.startswith("HGMMA") for t in body):
                continue
            last = max(k for k, t in enumerate(body) if t.startswith("HGMMA"))
            overlapped = 0
            for t in body[last + 1:] + body[:last]:
                if t.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"):
                    break
                overlapped += t.startswith("MUFU")
            print(f"{os.path.basename(path)}: loop of {len(body)} instructions, "
                  f"{sum(t.startswith('MUFU') for t in body)} MUFU, {overlapped} while its last wgmma may run")


if __name__ == "__main__":
    main()
