#!/usr/bin/env python3
"""Measures chorus's footprint as an MCP client sees it (issue 39, part 4):
`chorus serve` on the built-in configuration (store on, default limits),
its provider pointed at a zero-latency nginx (`CHORUS_BASE_URL`), driven
over MCP stdio by this script. Each binary given is measured in turns
(`--rounds`, the order swapped each round), each round with a fresh
compile cache, data and config directory:

- spawn -> `initialize` answered, warm plugin cache (best and median of 10);
- idle RSS 0.5 s after `initialize` (and its anonymous / file-backed parts);
- CPU per run of the default `ask` (5 + 1 calls) at concurrency 1, over
  4,000 runs after 200 of warm-up (`/proc/PID/stat` user + system);
- RSS after those runs;
- with `--in-flight N`: CPU per run and runs/s with N runs in flight (the
  client sends the next `ask` as each answer comes), over as many runs.

Usage: host/benches/footprint.py [--rounds N] [--runs N] [--in-flight N] CHORUS [CHORUS...]
Needs nginx (Debian's `nginx`) on PATH or in /usr/sbin."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

ANSWER = ('{"id":"bench","object":"chat.completion","model":"m","choices":[{"index":0,'
          '"message":{"role":"assistant","content":"An answer of moderate length, as models '
          'give: a sentence or two that the synthesizer will merge with the others."},'
          '"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":34,'
          '"cost":0.0005}}')


def nginx(tmp):
    """A zero-latency OpenAI-compatible provider: every POST gets ANSWER."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off; client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  keepalive_requests 1000000; keepalive_timeout 300s;
  server {{
    listen 127.0.0.1:0;
    location / {{ default_type application/json; return 200 '{ANSWER}'; }}
  }}
}}
""")
    # Port 0 is not resolved by nginx itself: pick a free port first.
    import socket
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    text = open(conf).read().replace("127.0.0.1:0", f"127.0.0.1:{port}")
    open(conf, "w").write(text)
    proc = subprocess.Popen([binary, "-c", conf, "-p", tmp], stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.02)
    return proc, f"http://127.0.0.1:{port}/v1"


class Server:
    def __init__(self, binary, env, stderr=subprocess.DEVNULL):
        self.started = time.monotonic()
        self.p = subprocess.Popen([binary, "serve", "--no-watch"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=stderr, env=env)
        self.next = 1
        reply = self.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "footprint", "version": "0"}})
        self.start_time = time.monotonic() - self.started
        assert "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode()); self.p.stdin.flush()

    def request(self, method, params):
        id_ = self.next; self.next += 1
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("chorus exited")
            msg = json.loads(line)
            if msg.get("id") == id_:
                return msg

    ASK = {"name": "ask", "arguments": {"prompt": "Which is better for a small team, A or B?"}}

    def ask(self):
        reply = self.request("tools/call", self.ASK)
        assert reply["result"]["isError"] is False, reply

    def pipelined(self, runs, in_flight):
        """`runs` asks, `in_flight` at a time: (CPU s per run, runs/s)."""
        def send():
            self.send({"jsonrpc": "2.0", "id": self.next, "method": "tools/call",
                       "params": self.ASK})
            self.next += 1
        cpu, t = self.cpu(), time.monotonic()
        sent = done = 0
        while sent < min(in_flight, runs):
            send(); sent += 1
        while done < runs:
            msg = json.loads(self.p.stdout.readline() or "null")
            if msg is None:
                raise RuntimeError("chorus exited")
            if "result" in msg:
                assert msg["result"]["isError"] is False, msg
                done += 1
                if sent < runs:
                    send(); sent += 1
        return (self.cpu() - cpu) / runs, runs / (time.monotonic() - t)

    def cpu(self):
        stat = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")

    def status(self, field):
        for line in open(f"/proc/{self.p.pid}/status"):
            if line.startswith(field):
                return int(line.split()[1]) / 1024
        return 0.0

    def close(self):
        self.p.stdin.close(); self.p.wait(timeout=30)


def measure(binary, provider, runs, in_flight=None):
    # The binary's pages in the page cache, all of them: a page fault maps
    # its cached neighbours too (fault-around), so file-backed RSS depends
    # on what is cached; read whole, each binary is measured alike.
    with open(os.path.realpath(binary), "rb") as f:
        while f.read(1 << 20):
            pass
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_")}
        env.update(XDG_CACHE_HOME=f"{tmp}/cache", XDG_DATA_HOME=f"{tmp}/data",
                   XDG_CONFIG_HOME=f"{tmp}/config", HOME=tmp,
                   CHORUS_BASE_URL=provider, CHORUS_API_KEY="bench")
        # The first start compiles and caches the plugins in the background:
        # wait until it says all are done (closing it sooner would leave the
        # rest to be compiled by the starts measured).
        first = Server(binary, dict(env, CHORUS_LOG="debug"), stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300
        for line in first.p.stderr:
            if b"plugin(s) in the background" in line or time.monotonic() > deadline:
                break
        first.close()
        starts = []
        for _ in range(10):
            s = Server(binary, env); starts.append(s.start_time); s.close()
        s = Server(binary, env)
        time.sleep(0.5)
        idle = (s.status("VmRSS:"), s.status("RssAnon:"), s.status("RssFile:"))
        for _ in range(200):
            s.ask()
        cpu = s.cpu()
        t = time.monotonic()
        for _ in range(runs):
            s.ask()
        wall = time.monotonic() - t
        cpu = (s.cpu() - cpu) / runs
        after = s.status("VmRSS:")
        many = s.pipelined(runs, in_flight) if in_flight else (0.0, 0.0)
        s.close()
        return {"start_best": min(starts) * 1e3, "start_p50": statistics.median(starts) * 1e3,
                "idle": idle, "cpu_ms": cpu * 1e3, "runs_s": runs / wall, "rss_after": after,
                "cpu_many_ms": many[0] * 1e3, "runs_s_many": many[1]}


def main():
    args = sys.argv[1:]
    rounds, runs, in_flight = 2, 4000, None
    while args and args[0].startswith("--"):
        flag, value = args[0], int(args[1]); args = args[2:]
        if flag == "--rounds":
            rounds = value
        elif flag == "--runs":
            runs = value
        elif flag == "--in-flight":
            in_flight = value
        else:
            sys.exit(f"unknown flag {flag}")
    if not args:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        provider_proc, provider = nginx(tmp)
        try:
            results = {b: [] for b in args}
            for r in range(rounds):
                order = args if r % 2 == 0 else list(reversed(args))
                for b in order:
                    results[b].append(measure(b, provider, runs, in_flight))
                    print(f"round {r + 1} {b}: {results[b][-1]}", file=sys.stderr)
        finally:
            provider_proc.terminate(); provider_proc.wait()
    print(f"| figure | {' | '.join(args)} |")
    print("|---" * (len(args) + 1) + "|")
    def rng(b, f, fmt):
        v = [f(x) for x in results[b]]
        return fmt.format(min(v)) + ("" if len(v) == 1 else " – " + fmt.format(max(v)))
    rows = [("spawn → initialize, warm (best of 10)", lambda x: x["start_best"], "{:.1f} ms"),
            ("spawn → initialize, warm (median of 10)", lambda x: x["start_p50"], "{:.1f} ms"),
            ("idle RSS", lambda x: x["idle"][0], "{:.1f} MB"),
            ("idle RSS, anonymous", lambda x: x["idle"][1], "{:.1f} MB"),
            ("idle RSS, file-backed", lambda x: x["idle"][2], "{:.1f} MB"),
            (f"RSS after {runs} runs", lambda x: x["rss_after"], "{:.1f} MB"),
            ("CPU per run, concurrency 1", lambda x: x["cpu_ms"], "{:.3f} ms"),
            ("runs/s, concurrency 1", lambda x: x["runs_s"], "{:.0f}")]
    if in_flight:
        rows += [(f"CPU per run, {in_flight} in flight", lambda x: x["cpu_many_ms"], "{:.3f} ms"),
                 (f"runs/s, {in_flight} in flight", lambda x: x["runs_s_many"], "{:.0f}")]
    for name, f, fmt in rows:
        print(f"| {name} | {' | '.join(rng(b, f, fmt) for b in args)} |")


if __name__ == "__main__":
    main()
