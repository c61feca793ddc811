// chorus's MCP App: speaks the MCP Apps protocol (JSON-RPC 2.0 over
// postMessage with the host: ui/initialize, ui/notifications/tool-result,
// tools/call, resources/read) and renders a run from the tool result's
// structuredContent. Every model text goes in as text (textContent), never
// as HTML.
"use strict";
(function () {
  var host = window.parent;
  var nextId = 1;
  var pending = {};
  var hostCapabilities = {};
  var app = document.getElementById("app");

  function send(message) {
    message.jsonrpc = "2.0";
    host.postMessage(message, "*");
  }
  function request(method, params) {
    var id = nextId++;
    send({ id: id, method: method, params: params || {} });
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
    });
  }
  function notify(method, params) {
    send({ method: method, params: params || {} });
  }

  window.addEventListener("message", function (event) {
    if (event.source !== host) return;
    var m = event.data;
    if (!m || m.jsonrpc !== "2.0") return;
    if (m.method === undefined && m.id !== undefined) {
      var waiting = pending[m.id];
      if (!waiting) return;
      delete pending[m.id];
      if (m.error) waiting.reject(new Error(m.error.message || "error " + m.error.code));
      else waiting.resolve(m.result);
      return;
    }
    if (m.method === "ui/notifications/tool-result") {
      show(m.params || {});
    } else if (m.method === "ui/notifications/tool-cancelled") {
      say("The call was cancelled.");
    } else if (m.id !== undefined) {
      // Requests from the host: teardown and ping are answered, nothing else is offered.
      if (m.method === "ui/resource-teardown" || m.method === "ping") {
        send({ id: m.id, result: {} });
      } else {
        send({ id: m.id, error: { code: -32601, message: "method not found: " + m.method } });
      }
    }
  });

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }
  function clear() { while (app.firstChild) app.removeChild(app.firstChild); }
  function say(text) { clear(); app.appendChild(el("p", { "class": "muted", text: text })); }
  function usd(x) {
    if (typeof x !== "number") return "—";
    if (x === 0) return "$0";
    return "$" + (Math.abs(x) >= 1 ? x.toFixed(2) : x.toPrecision(2));
  }
  function ms(x) { return typeof x === "number" ? (x >= 1000 ? (x / 1000).toFixed(1) + " s" : x + " ms") : "—"; }
  function facts(items) {
    return el("ul", { "class": "facts" }, items.filter(Boolean).map(function (t) { return el("li", { text: t }); }));
  }

  // A small markdown renderer that only ever makes elements and text nodes:
  // headings, paragraphs, lists, fenced code, inline code, bold and italic.
  // Links and raw HTML stay text; nothing is fetched.
  function markdown(source, attrs) {
    var root = el("div", attrs);
    var lines = source.replace(/\r\n?/g, "\n").split("\n");
    var para = [], list = null, i = 0;
    function flush() {
      if (para.length) root.appendChild(inline("p", para.join(" ")));
      para = [];
      list = null;
    }
    while (i < lines.length) {
      var line = lines[i], m;
      if (/^\s*```/.test(line)) {
        flush();
        var code = [];
        for (i++; i < lines.length && !/^\s*```/.test(lines[i]); i++) code.push(lines[i]);
        root.appendChild(el("pre", {}, [el("code", { text: code.join("\n") })]));
      } else if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) {
        flush();
        root.appendChild(inline("h" + Math.min(6, m[1].length + 2), m[2]));
      } else if ((m = /^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/.exec(line))) {
        if (para.length) flush();
        var kind = m[1] === undefined ? "ul" : "ol";
        if (!list || list.tagName.toLowerCase() !== kind) {
          list = el(kind);
          root.appendChild(list);
        }
        list.appendChild(inline("li", m[2]));
      } else if (/^\s*$/.test(line)) {
        flush();
      } else {
        if (list) list = null;
        para.push(line.trim());
      }
      i++;
    }
    flush();
    return root;
  }
  function inline(tag, text) {
    var node = el(tag);
    var pattern = /(`[^`]+`|\*\*[^*]+\*\*|__[^_]+__|\*[^*\s][^*]*\*|_[^_\s][^_]*_)/g;
    var at = 0, m;
    while ((m = pattern.exec(text))) {
      if (m.index > at) node.appendChild(document.createTextNode(text.slice(at, m.index)));
      var t = m[0];
      if (t[0] === "`") node.appendChild(el("code", { text: t.slice(1, -1) }));
      else if (t.slice(0, 2) === "**" || t.slice(0, 2) === "__") node.appendChild(el("strong", { text: t.slice(2, -2) }));
      else node.appendChild(el("em", { text: t.slice(1, -1) }));
      at = m.index + t.length;
    }
    if (at < text.length) node.appendChild(document.createTextNode(text.slice(at)));
    return node;
  }

  function show(result) {
    var run = result.structuredContent;
    clear();
    if (!run || typeof run !== "object") {
      var text = (result.content || []).filter(function (c) { return c.type === "text"; })
        .map(function (c) { return c.text; }).join("\n\n");
      app.appendChild(el("pre", { "class": "reply", text: text || "The result carries no run." }));
      return;
    }
    var title = run.run_id ? "Run " + run.run_id : "No run";
    app.appendChild(el("h1", { text: title + " · " + (run.pipeline || "") }));
    app.appendChild(el("p", {}, [
      el("span", { "class": "badge " + (run.kind === "none" ? "failed" : "ok"), text: run.kind || "?" }),
      document.createTextNode(" " + (run.summary || "")),
    ]));
    if (run.error) app.appendChild(el("p", { "class": "error", text: run.error.kind + ": " + run.error.message }));
    if (run.resynthesis_of) app.appendChild(el("p", { "class": "muted", text: "Re-synthesis of run " + run.resynthesis_of }));
    var usage = run.usage || {};
    app.appendChild(facts([
      "time " + ms(run.elapsed_ms),
      "cost " + (usage.cost_usd === null ? "unknown" : usd(usage.cost_usd) + (usage.cost_estimated ? " (estimated)" : "")),
      "tokens " + (usage.prompt_tokens || 0) + " in / " + (usage.completion_tokens || 0) + " out" + (usage.tokens_estimated ? " (estimated in part)" : ""),
    ]));
    app.appendChild(el("h2", { text: "Answer" }));
    var sources = run.sources || [];
    var answer = run.answer || "(no answer)";
    // The sources are listed on their own below: the answer's closing list comes off.
    var list = sources.length ? answer.lastIndexOf("\n\nSources:") : -1;
    if (list > 0) answer = answer.slice(0, list);
    // The answer is markdown written by a model: built as elements, never parsed as HTML.
    app.appendChild(markdown(answer, { id: "answer", "class": "answer" }));
    if (sources.length) {
      app.appendChild(el("h2", { id: "sources-title", text: "Sources" }));
      app.appendChild(el("ol", { id: "sources", "class": "sources", "aria-labelledby": "sources-title" },
        sources.map(function (s) {
          return el("li", { value: String(s.number) }, [
            link(s), el("span", { "class": "muted", text: " — cited by " + (s.cited_by || []).join(", ") }),
          ]);
        })));
    }
    members(run);
    if ((run.notes || []).length) {
      app.appendChild(el("h2", { text: "Notes" }));
      app.appendChild(el("ul", { "class": "notes" }, run.notes.map(function (n) { return el("li", { text: n }); })));
    }
    if (run.run_id) resynthesis(run);
    notifySize();
  }

  function members(run) {
    var calls = run.calls || [];
    if (!calls.length) return;
    app.appendChild(el("h2", { text: "Each model" }));
    var tabs = el("div", { "class": "tabs", role: "tablist", "aria-label": "Models" });
    app.appendChild(tabs);
    var panels = [];
    calls.forEach(function (call, i) {
      var tab = el("button", {
        type: "button", role: "tab", id: "tab-" + i, "aria-controls": "member-" + i,
        "aria-selected": i === 0 ? "true" : "false", "class": call.status,
        text: call.stage === "fan-out" ? call.model : call.model + " (" + call.stage + ")",
      });
      var panel = el("section", {
        "class": "tabpanel member", role: "tabpanel", id: "member-" + i, "aria-labelledby": "tab-" + i,
      });
      if (i !== 0) panel.hidden = true;
      panel.appendChild(el("h3", { text: call.model }));
      panel.appendChild(facts([
        "status " + call.status,
        "latency " + ms(call.latency_ms),
        call.ttft_ms != null ? "first token " + ms(call.ttft_ms) : null,
        call.queued_ms ? "queued " + ms(call.queued_ms) : null,
        call.attempts > 1 ? call.attempts + " attempts" : null,
        "tokens " + (call.prompt_tokens || 0) + " in / " + (call.completion_tokens || 0) + " out" + (call.tokens_estimated ? " (estimated)" : ""),
        "cost " + usd(call.cost_usd) + (call.cost_estimated ? " (estimated)" : ""),
      ]));
      if (call.error) panel.appendChild(el("p", { "class": "reason", text: call.error.kind + ": " + call.error.message }));
      var cites = (run.sources || []).filter(function (s) { return (s.calls || []).indexOf(call.id) >= 0; });
      if (cites.length) {
        panel.appendChild(el("p", { "class": "cites" }, [document.createTextNode("Cites ")].concat(
          cites.map(function (s, j) {
            return el("span", {}, [document.createTextNode((j ? ", " : "") + "[" + s.number + "] "), link(s)]);
          }))));
      }
      var reply = el("div", { "class": "reply" });
      panel.appendChild(reply);
      reply.dataset.call = String(call.id);
      if (!call.error) fetchReply(run.run_id, call.id, reply);
      tab.addEventListener("click", function () {
        panels.forEach(function (p, j) {
          p.panel.hidden = j !== i;
          p.tab.setAttribute("aria-selected", j === i ? "true" : "false");
        });
        notifySize();
      });
      panels.push({ tab: tab, panel: panel });
      tabs.appendChild(tab);
      app.appendChild(panel);
    });
  }

  // A source as a link the host opens (ui/open-link): a sandboxed app does
  // not navigate. Only web addresses; the host may refuse, which is said.
  function link(source) {
    var shown = source.title || source.url;
    if (!/^https?:\/\//i.test(source.url)) return el("span", { text: shown });
    var a = el("a", { href: source.url, title: source.url, text: shown, rel: "noopener noreferrer" });
    a.addEventListener("click", function (event) {
      event.preventDefault();
      if (!hostCapabilities.openLinks) {
        a.title = "This host does not open links from apps: " + source.url;
        return;
      }
      request("ui/open-link", { url: source.url }).then(function (r) {
        if (r && r.isError) a.title = "The host did not open " + source.url;
      }, function (e) { a.title = "The host refused: " + e.message; });
    });
    return a;
  }

  // The replies are not in the tool result: read through the host when it offers resources.
  function fetchReply(runId, n, into) {
    var uri = "chorus://runs/" + runId + "/calls/" + n + "/reply";
    if (!hostCapabilities.serverResources) {
      into.textContent = "This model's answer is in the resource " + uri + " (this host does not let apps read resources).";
      into.className = "reply muted";
      return;
    }
    into.textContent = "Loading the answer…";
    request("resources/read", { uri: uri }).then(function (r) {
      var texts = (r.contents || []).map(function (c) { return c.text || ""; });
      var text = texts.join("");
      into.textContent = "";
      into.className = "reply";
      into.appendChild(text ? markdown(text, {}) : el("p", { text: "(empty answer)" }));
      notifySize();
    }, function (e) {
      into.textContent = "Could not read " + uri + ": " + e.message;
      into.className = "reply reason";
    });
  }

  function resynthesis(run) {
    app.appendChild(el("h2", { text: "Re-synthesize" }));
    if (!hostCapabilities.serverTools) {
      app.appendChild(el("p", { "class": "muted", text: "This host does not let apps call tools: ask for `resynthesize` with run_id " + run.run_id + "." }));
      return;
    }
    var how = el("select", { id: "resynth-how", "aria-label": "Merge with" }, [
      el("option", { value: "", text: "the run's own merge" }),
      el("option", { value: "synthesizer", text: "synthesizer…" }),
      el("option", { value: "pipeline", text: "pipeline…" }),
    ]);
    var name = el("input", { id: "resynth-name", type: "text", "aria-label": "Synthesizer or pipeline name", placeholder: "name" });
    var go = el("button", { id: "resynth", type: "button", text: "Re-synthesize with…" });
    var status = el("p", { id: "resynth-status", "class": "muted", role: "status" });
    go.addEventListener("click", function () {
      var args = { run_id: run.run_id };
      if (how.value && name.value.trim()) args[how.value] = name.value.trim();
      go.disabled = true;
      status.textContent = "Merging run " + run.run_id + " again…";
      request("tools/call", { name: "resynthesize", arguments: args }).then(show, function (e) {
        go.disabled = false;
        status.textContent = "The host refused: " + e.message;
      });
    });
    app.appendChild(el("div", { "class": "actions" }, [how, name, go]));
    app.appendChild(status);
  }

  var lastHeight = 0;
  function notifySize() {
    var height = document.documentElement.scrollHeight;
    if (height === lastHeight) return;
    lastHeight = height;
    notify("ui/notifications/size-changed", { width: document.documentElement.scrollWidth, height: height });
  }
  if (window.ResizeObserver) new ResizeObserver(notifySize).observe(document.documentElement);

  request("ui/initialize", {
    protocolVersion: "2026-01-26",
    appInfo: { name: "chorus", version: document.querySelector("meta[name=generator]").content.split(" ")[1] },
    appCapabilities: {},
  }).then(function (r) {
    hostCapabilities = (r && r.hostCapabilities) || {};
    notify("ui/notifications/initialized", {});
  }, function (e) {
    say("The host did not accept this app: " + e.message);
  });
})();
