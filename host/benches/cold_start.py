#!/usr/bin/env python3
"""Times a cold first start of `chorus serve`: spawn -> `initialize`
answered and spawn -> `tools/list` answered, each run with a fresh, empty
compile cache (XDG_CACHE_HOME) and data directory, on the built-in
configuration (16 plugins). Usage: host/benches/cold_start.py CHORUS_BINARY [RUNS]
(set CHORUS_COMPILE_JOBS to compare compile parallelism)."""
import json, os, re, statistics, subprocess, sys, tempfile, threading, time

def once(binary):
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_") or k == "CHORUS_COMPILE_JOBS"}
        env.update(XDG_CACHE_HOME=f"{tmp}/cache", XDG_DATA_HOME=f"{tmp}/data",
                   XDG_CONFIG_HOME=f"{tmp}/config", CHORUS_LOG="debug",
                   OPENROUTER_API_KEY="unused")
        start = time.monotonic()
        p = subprocess.Popen([binary, "serve", "--no-watch"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        compiled = {}
        def read_err():
            for line in p.stderr:
                m = re.search(rb"compiled (\d+) plugin\(s\) in the background", line)
                if m:
                    compiled["t"] = time.monotonic() - start
        threading.Thread(target=read_err, daemon=True).start()
        def send(msg):
            p.stdin.write((json.dumps(msg) + "\n").encode()); p.stdin.flush()
        def wait(id_):
            while True:
                msg = json.loads(p.stdout.readline())
                if msg.get("id") == id_:
                    return time.monotonic() - start
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "cold-start", "version": "0"}}})
        t_init = wait(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        t_list = wait(2)
        deadline = time.monotonic() + 10  # a binary that compiles first logs no such line
        while "t" not in compiled and time.monotonic() < deadline and t_list < 5:
            time.sleep(0.005)
        p.stdin.close(); p.wait(timeout=30)
        return t_init, t_list, compiled.get("t")

def main():
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rows = [once(binary) for _ in range(runs)]
    ms = lambda xs: f"{statistics.median(xs) * 1000:.0f} ms (min {min(xs) * 1000:.0f}, max {max(xs) * 1000:.0f})"
    print(f"{binary}, {runs} cold starts")
    print("spawn -> initialize answered:", ms([r[0] for r in rows]))
    print("spawn -> tools/list answered:", ms([r[1] for r in rows]))
    bg = [r[2] for r in rows if r[2] is not None]
    if bg:
        print("spawn -> background compiles done:", ms(bg))

main()
