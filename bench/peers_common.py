"""Shared by the bench scripts: timing (CUDA events around each run, median after warm-up) and
the D:N[:H] shape arguments."""
import time

import torch


def shapes(args, default):
    """(D, N, heads) for each D:N (heads 2048/D) or D:N:H argument, else for each D:N of `default`."""
    only = [tuple(int(x) for x in a.split(":")) for a in args
            if ":" in a and all(x.isdigit() for x in a.split(":"))] or default
    return [s if len(s) == 3 else (*s, 2048 // s[0]) for s in only]


def median_ms(fn, warmup=10, runs=100, hide_host_cycles=0):
    """Median over `runs` event-timed calls, each after a sync. With hide_host_cycles, a GPU
    sleep of that many cycles goes ahead of each start event, so that the host's work before
    the launch overlaps it: the kernels' time alone."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hide_host_cycles:
            torch.cuda._sleep(hide_host_cycles)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def call_then_rest(fn, seconds):
    """One call (which may compile), then `seconds` with the GPU idle, as bench_util.h's
    callThenRest: later timing starts from rest."""
    fn()
    torch.cuda.synchronize()
    time.sleep(seconds)


def sustained_ms(fn, calls):
    """Milliseconds a call over `calls` back-to-back calls, after one call and a 2 s rest: the
    steady state of a kernel that runs at the power cap (bench_util.h's twin)."""
    call_then_rest(fn, 2.0)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / calls


def median_ms_from_rest(fn, warmup=10, runs=100, hide_host_cycles=0):
    """median_ms after one call and a 1 s rest, as bench_util.h's: every measurement starts
    from the same heat and power state, not the one the measurement before left."""
    call_then_rest(fn, 1.0)
    return median_ms(fn, warmup, runs, hide_host_cycles)
