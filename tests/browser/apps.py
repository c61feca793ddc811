"""chorus's MCP App in a real browser, hosted by the MCP Apps SDK's AppBridge.

Started by tests/e2e/mcp/apps.rs with one JSON argument (the HTTP endpoint of a
real `chorus serve --http` and its token, the answers the mock gives, where
chromium and the bundled bridge are). As an MCP Apps client does, it lists
the tools (declaring the extension), reads `ui://chorus/run` over MCP, calls
a pipeline tool, then loads the app into a sandboxed iframe of
apps_host.html, served from 127.0.0.1, and delivers the real result. The
app's own requests (each model's reply, a `resynthesize` call) go through
the bridge to the host page and on to chorus. Nothing may leave 127.0.0.1,
no dialog may open, no error be logged, and axe-core finds no serious
accessibility violation in the app. Prints `ok` last when every check
passed; any failed check raises.
"""

import functools
import http.server
import json
import os
import sys
import threading
import urllib.error
import urllib.request

from playwright.sync_api import sync_playwright

args = json.loads(sys.argv[1])
EXTENSION = "io.modelcontextprotocol/ui"


def check(condition, message):
    if not condition:
        raise AssertionError(message)


ids = iter(range(1, 1_000_000))


def mcp(method, params=None):
    """One MCP request as a stateless 2026-07-28 client that declares the
    MCP Apps extension; its result, or an exception carrying the error."""
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "apps-test-host", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
    }
    message = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {args['token']}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    # 2026-07-28 names what a request acts on in a header too.
    name = params.get("name") or params.get("uri")
    if name:
        headers["mcp-name"] = name
    request = urllib.request.Request(args["endpoint"], data=json.dumps(message).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method}: HTTP {e.code}: {e.read().decode()[:500]}") from None
    try:
        replies = [json.loads(text)]
    except json.JSONDecodeError:
        replies = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    for reply in replies:
        if reply.get("id") == message["id"]:
            if "error" in reply:
                raise RuntimeError(f"{method}: {reply['error']}")
            return reply["result"]
    raise RuntimeError(f"{method}: no response in {text[:300]}")


# The client's side: the tools name the app, the app is a resource.
tools = {t["name"]: t for t in mcp("tools/list")["tools"]}
check(tools["ask"].get("_meta", {}).get("ui", {}).get("resourceUri") == "ui://chorus/run", tools["ask"])
read = mcp("resources/read", {"uri": "ui://chorus/run"})["contents"][0]
check(read["mimeType"] == "text/html;profile=mcp-app", read.get("mimeType"))
check(read["_meta"]["ui"]["csp"]["connectDomains"] == [], read.get("_meta"))
html = read["text"]
result = mcp("tools/call", {"name": "ask", "arguments": {"prompt": "What is the capital of France?"}})
run = result["structuredContent"]
# The text answer closes with its numbered sources (m1 searched the web).
check(run["answer"].startswith(args["answer"] + "\n\nSources:\n1. "), run)
check([s["url"] for s in run["sources"]] == [args["source"]], run.get("sources"))

# The host page and the bridge bundle, from 127.0.0.1.
files = {"/host.html": args["host_page"], "/app-bridge.js": args["bridge"]}


class Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = files.get(self.path)
        if self.path == "/favicon.ico":
            self.send_response(204)
            self.end_headers()
            return
        if path is None:
            self.send_error(404)
            return
        body = open(path, "rb").read()
        self.send_response(200)
        kind = "text/html" if path.endswith(".html") else "text/javascript"
        self.send_header("content-type", f"{kind}; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
threading.Thread(target=server.serve_forever, daemon=True).start()
origin = f"http://127.0.0.1:{server.server_address[1]}"

with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=args["chromium"], args=["--no-sandbox", "--disable-gpu"])
    context = browser.new_context(viewport={"width": 900, "height": 1000})
    requests, dialogs, errors = [], [], []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.expose_function("chorus", mcp)
    page.goto(f"{origin}/host.html")
    page.evaluate("([html, result]) => window.startApp(html, result)", [html, result])

    app = page.frame_locator("#app")
    answer = app.locator("#answer")
    answer.wait_for(timeout=30_000)
    # Markdown made into elements: **Paris** is bold, not asterisks.
    check(answer.inner_text().strip() == args["answer"].replace("**", ""), answer.inner_text())
    check(answer.locator("strong").inner_text() == "Paris", "the answer's markdown is not rendered")
    check(run["run_id"] in app.locator("h1").inner_text(), app.locator("h1").inner_text())
    tabs = app.locator("[role=tab]")
    check(tabs.count() == len(run["calls"]), f"{tabs.count()} tabs for {len(run['calls'])} calls")
    # Each member's reply, read by the app through the bridge from chorus.
    for i, call in enumerate(run["calls"]):
        if call["stage"] != "fan-out" or call.get("error"):
            continue
        tabs.nth(i).click()
        panel = app.locator(f"#member-{i}")
        check(panel.is_visible(), f"tab {i} shows no panel")
        reply = panel.locator(".reply")
        expected = args["replies"][call["model"]].replace("**", "")
        reply.filter(has_text=expected).wait_for(timeout=15_000)
        check(reply.inner_text().strip() == expected, f"{call['model']}: {reply.inner_text()!r}")
        check("latency" in panel.inner_text() and "cost" in panel.inner_text(), panel.inner_text())
    # The sources on their own (the answer's closing list came off), m1's
    # panel names what it cited, and a source opens through the host.
    sources = app.locator("#sources li")
    check(sources.count() == 1, f"{sources.count()} sources shown")
    check("Paris — Wikipedia" in sources.inner_text() and "cited by m1" in sources.inner_text(), sources.inner_text())
    check("Sources:" not in answer.inner_text(), answer.inner_text())
    tabs.nth(0).click()
    check("Cites [1] Paris — Wikipedia" in app.locator("#member-0 .cites").inner_text(), app.locator("#member-0").inner_text())
    app.locator("#sources a").click()
    page.wait_for_function("(window.openedLinks || []).length > 0", timeout=10_000)
    check(page.evaluate("window.openedLinks") == [args["source"]], page.evaluate("window.openedLinks"))
    # The app told the host its size (ui/notifications/size-changed).
    check((page.evaluate("window.appHeight") or 0) > 300, f"size: {page.evaluate('window.appHeight')}")
    # A hostile reply is text: nothing of it became an element.
    check(app.locator("img").count() == 0 and app.locator("#member-0 script").count() == 0, "markup got through")
    if args.get("screenshots"):
        os.makedirs(args["screenshots"], exist_ok=True)
        tabs.nth(0).click()
        page.wait_for_timeout(300)
        page.locator("#app").screenshot(path=os.path.join(args["screenshots"], "mcp-app.png"))

    # Re-synthesize through the bridge: the host forwards the call to chorus.
    app.locator("#resynth").click()
    app.locator("#answer", has_text=args["resynthesized"].replace("**", "")).wait_for(timeout=30_000)
    heading = app.locator("h1").inner_text()
    check(run["run_id"] not in heading, f"still the old run: {heading}")
    shown = app.locator("main").inner_text()
    check(f"Re-synthesis of run {run['run_id']}" in shown, f"the source run is not named: {shown}")
    calls = page.evaluate("window.appCalls")
    check(calls == [{"name": "resynthesize", "arguments": {"run_id": run["run_id"]}}], calls)

    # axe-core in the app's frame: no serious or critical violation.
    frame = page.main_frame.child_frames[0]
    frame.add_script_tag(path=args["axe"])
    result = frame.evaluate("axe.run()")
    bad = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    check(result["passes"] and not bad, f"axe in the app: {bad}")

    check(not dialogs, f"dialogs: {dialogs}")
    check(not errors, f"errors: {errors}")
    away = [u for u in requests if not (u.startswith("http://127.0.0.1:") or u.startswith("about:") or u.startswith("data:"))]
    check(not away, f"requests left 127.0.0.1: {away}")
    browser.close()

server.shutdown()
print("ok", flush=True)
