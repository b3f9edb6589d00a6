#!/usr/bin/env python3
"""dsh from the terminal, measured (issue 45): ratios against baselines run in the same loop.

C1  a batch of 100 one-tool-call prompts (`!echo N`) at `--jobs 4` against `--jobs 1`
C3  the daemon's CPU (utime + stime from /proc, clock ticks) for each of 4 batches of 100 in a
    row on one daemon, and the sessions it still holds after them (`--cpu` runs only this)
C2  `dsh exec --json '!echo hi'`: spawn to first byte and to exit, against the same turn
    through the official TypeScript ACP SDK (@agentclientprotocol/sdk) driving `dsh acp`

Both sides talk to one `dsh serve` started here (temporary socket and state, auto mode).
Usage: benches/cli/measure.py [--rounds N] [--sdk DIR] [--cpu]; DSH_BENCH_BIN picks the dsh binary
(default target/release/dsh, else target/debug/dsh). --sdk DIR: a folder where
`npm install @agentclientprotocol/sdk` was run (C2 is skipped without it). Judges nothing:
it prints medians and ratios for BENCHMARKS.md.
"""
import os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def binary():
    if os.environ.get("DSH_BENCH_BIN"):
        return os.environ["DSH_BENCH_BIN"]
    for profile in ("release", "debug"):
        path = os.path.join(ROOT, "target", profile, "dsh")
        if os.path.exists(path):
            return path
    sys.exit("no dsh binary: cargo build --release, or set DSH_BENCH_BIN")


def timed(argv, cwd=None):
    """(seconds to the first byte on stdout, seconds to exit); fails on a non-zero exit."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    child.stdout.read(1)
    first = time.perf_counter() - start
    rest, err = child.communicate()
    total = time.perf_counter() - start
    if child.returncode != 0:
        sys.exit(f"{argv[:3]} failed ({child.returncode}): {err.decode(errors='replace')}")
    return first, total


def cpu_ticks(pid):
    """The process's user + system time, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main():
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 5
    sdk = args[args.index("--sdk") + 1] if "--sdk" in args else None
    dsh = binary()
    tmp = tempfile.mkdtemp(prefix="dsh-bench-cli-")
    socket, state, config, ws = (os.path.join(tmp, n) for n in ("s.sock", "state", "c.toml", "w"))
    os.makedirs(ws)
    with open(config, "w") as f:
        f.write('[permissions]\ndefault_mode = "auto"\n')
    prompts = os.path.join(tmp, "prompts.txt")
    with open(prompts, "w") as f:
        f.writelines(f"!echo {n}\n" for n in range(100))
    daemon = subprocess.Popen([dsh, "serve", "--socket", socket, "--state-dir", state,
                               "--config", config], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Its first line says it listens.
        daemon.stdout.readline()
        at = ["--socket", socket, "--state-dir", state, "--config", config, "--cwd", ws]
        print(f"dsh: {dsh}; {rounds} rounds, alternated; medians")
        ticks = []
        for _ in range(4):
            before = cpu_ticks(daemon.pid)
            timed([dsh, "exec", *at, "--prompts", prompts, "--jobs", "4"])
            ticks.append(cpu_ticks(daemon.pid) - before)
        status = subprocess.run([dsh, "status", "--socket", socket], capture_output=True,
                                text=True).stdout
        held = next((line.split(":")[1].strip() for line in status.splitlines()
                     if line.startswith("sessions:")), "?")
        print(f"C3 daemon CPU per batch of 100 (ticks): {ticks}; sessions held after: {held}")
        if "--cpu" in args:
            return
        batch = {1: [], 4: []}
        for _ in range(rounds):
            for jobs in (1, 4):
                batch[jobs].append(timed([dsh, "exec", *at, "--prompts", prompts,
                                          "--jobs", str(jobs)])[1])
        one, four = statistics.median(batch[1]), statistics.median(batch[4])
        print(f"C1 batch of 100 `!echo`: --jobs 1 {one:.2f} s, --jobs 4 {four:.2f} s; "
              f"jobs1/jobs4 {one / four:.2f}x")
        if sdk and shutil.which("node"):
            script = os.path.join(sdk, "sdk_turn.mjs")
            shutil.copy(os.path.join(HERE, "sdk_turn.mjs"), script)
            ours, theirs = [], []
            for _ in range(rounds * 4):
                ours.append(timed([dsh, "exec", "--json", *at, "!echo hi"]))
                theirs.append(timed(["node", script, dsh, socket, state, config, ws]))
            med = lambda xs, i: statistics.median(x[i] for x in xs)
            print(f"C2 first byte: dsh exec {med(ours, 0) * 1e3:.1f} ms, TS SDK + dsh acp "
                  f"{med(theirs, 0) * 1e3:.1f} ms; dsh/sdk {med(ours, 0) / med(theirs, 0):.2f}")
            print(f"C2 whole turn: dsh exec {med(ours, 1) * 1e3:.1f} ms, TS SDK + dsh acp "
                  f"{med(theirs, 1) * 1e3:.1f} ms; dsh/sdk {med(ours, 1) / med(theirs, 1):.2f}")
        else:
            print("C2 skipped: no --sdk DIR (npm install @agentclientprotocol/sdk there) or no node")
    finally:
        subprocess.run([dsh, "stop", "--socket", socket], capture_output=True)
        daemon.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
