"""Where each profiled kernel's warps wait, from an Nsight Compute report of ncu_attention.py
(or any with the WarpStateStats and SourceCounters sections, e.g. --set full): per kernel, the
warp cycles stalled per issued instruction by reason, then the sampled stalls by reason with
the SASS opcodes that collect most of them. Needs ncu (on the GPU machine):
    python3 bench/ncu_stalls.py REPORT.ncu-rep > stalls.txt"""
import collections
import csv
import io
import re
import subprocess
import sys

PREFIX, SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def ncu_csv(report, *args):
    text = subprocess.run(["ncu", "--import", report, "--csv", *args], check=True, capture_output=True,
                          text=True).stdout
    return list(csv.reader(io.StringIO(text)))


def stall_ratios(report):
    rows = ncu_csv(report, "--page", "raw")
    header, kernels = rows[0], rows[2:]  # rows[1]: units
    names = [k[header.index("Kernel Name")] for k in kernels]
    ratios = {}
    for i, metric in enumerate(header):
        if metric.startswith(PREFIX) and metric.endswith(SUFFIX):
            values = [float(k[i].replace(",", "") or 0) for k in kernels]
            if max(values) > 0.05:
                ratios[metric[len(PREFIX):-len(SUFFIX)]] = values
    return names, ratios


def sampled_stalls(report, kernel):
    """{reason: Counter of opcode -> samples}, the kernel's total samples, and per instruction
    (address, SASS, samples, Counter of reason -> samples)."""
    rows = [r for r in ncu_csv(report, "--page", "source", "--print-source", "sass", "--kernel-name", kernel)
            if len(r) > 10]
    header, lines = rows[0], rows[1:]
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    by_reason = {r: collections.Counter() for r in reasons}
    total, instructions = 0, []
    for line in lines:
        field = dict(zip(header, line))
        source = field["Source"].strip()
        opcode = re.sub(r"^@!?U?P\w+\s+", "", source).split(" ")[0].split(".")[0]
        samples = int(field["Warp Stall Sampling (All Samples)"] or 0)
        total += samples
        its = collections.Counter()
        for reason in reasons:
            its[reason] = int(field[reason] or 0)
            by_reason[reason][opcode] += its[reason]
        instructions.append((field.get("Address", "?"), source, samples, its, int(
            field.get("Instructions Executed", "0").replace(",", "") or 0)))
    return by_reason, total, instructions


def main():
    report = sys.argv[1]
    hot = int(sys.argv[sys.argv.index("--hot") + 1]) if "--hot" in sys.argv else 0
    spans = [sys.argv[i + 1].split(":", 1) for i, a in enumerate(sys.argv) if a == "--phases"]
    names, ratios = stall_ratios(report)
    print("warp cycles stalled per issued instruction")
    print(f"  {'reason':22s} " + " ".join(f"{n[:14]:>14s}" for n in names))
    for reason, values in sorted(ratios.items(), key=lambda item: -item[1][0]):
        print(f"  {reason:22s} " + " ".join(f"{v:14.2f}" for v in values))
    for name in names:
        by_reason, total, instructions = sampled_stalls(report, name)
        print(f"\n{name[:60]}: {total} samples")
        for reason, opcodes in sorted(by_reason.items(), key=lambda item: -sum(item[1].values()))[:8]:
            count = sum(opcodes.values())
            top = ", ".join(f"{op} {n}" for op, n in opcodes.most_common(6) if n)
            print(f"  {reason:20s} {count:7d} {100 * count / max(total, 1):5.1f}%  {top}")
        if hot:
            print(f"  the {hot} instructions with the most samples:")
        for address, source, samples, its, _ in sorted(instructions, key=lambda i: -i[2])[:hot]:
            top = ", ".join(f"{r[len('stall_'):]} {n}" for r, n in its.most_common(3) if n)
            print(f"  {address:>8s} {100 * samples / max(total, 1):5.1f}%  {source[:56]:56s} {top}")
        for kernel, span in spans:
            if kernel in name:
                print_phases(instructions, total, *(int(x, 16) for x in span.split("-")))


def print_phases(instructions, total, lo, hi):
    """The samples of the instructions at offsets [lo, hi] (from the kernel's first), summed
    from one barrier, wgmma or branch to the next."""
    base = int(instructions[0][0], 16)
    print(f"  phases of {lo:#x}-{hi:#x}:")
    phases = []
    for address, source, samples, its, executed in instructions:
        if not lo <= int(address, 16) - base <= hi:
            continue
        if not phases or re.search(r"DEPBAR|HGMMA|BAR\.|SYNCS|BRA|WARPGROUP\.ARRIVE", source):
            phases.append([f"{int(address, 16) - base:#x} {' '.join(source.split())[:56]}", 0, collections.Counter(), 0])
        phases[-1][1] += samples
        phases[-1][2].update(its)
        phases[-1][3] += executed
    for label, samples, its, executed in phases:
        top = ", ".join(f"{r[len('stall_'):]} {n}" for r, n in its.most_common(3) if n)
        print(f"  {label:66s} {samples:6d} {100 * samples / max(total, 1):5.1f}%  {executed / 1e6:6.2f}M instr  {top}")


if __name__ == "__main__":
    main()
