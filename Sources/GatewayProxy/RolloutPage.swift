import GatewayCore
import GatewayCrypto
import Attestation

/// Admin `GET /`: the rollout view, one self-contained page (inline style, script and SVG; no other origin, works
/// offline) that reads `GET /stats` on load and every 5 seconds. Everything from the JSON goes into the page as
/// text (`textContent`), never as markup: app ids and error messages are not trusted to be HTML-safe.
enum RolloutPage {
    static let style = """
    body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
    h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.2em 0 .4em}h3{font-size:1em;margin:.8em 0 .3em}
    .muted{color:#666}.bad{color:#b00020}.ok{color:#1b7a2f}
    table{border-collapse:collapse;margin:.3em 0}td,th{padding:.15em .7em;text-align:right;border-bottom:1px solid #ddd}
    th:first-child,td:first-child{text-align:left}
    section.route{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:1em 0}
    .badge{display:inline-block;padding:0 .5em;border-radius:3px;font-size:.85em;background:#eee}
    .badge.monitor{background:#fff3cd}.badge.enforce{background:#d1e7dd}
    .big{font-size:1.6em;font-weight:600}.cols{display:flex;flex-wrap:wrap;gap:2em}
    svg.chart{display:block;margin:.4em 0}
    """

    static let script = """
    "use strict";
    const $ = (tag, attrs, ...kids) => {
      const e = document.createElement(tag);
      for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
      for (const k of kids) e.append(k);
      return e;
    };
    const fmt = v => (typeof v === "number" ? v.toLocaleString("en-US") : v === null ? "–" : String(v));
    const stat = (path, value, text) =>
      $("span", {"data-stat": path, "data-value": JSON.stringify(value)}, text === undefined ? fmt(value) : text);
    const CATS = [["verified", "verified"], ["missing", "missing token (outdated client or unknown origin)"],
      ["client_attestation_failed", "device could not attest (SDK placeholder)"], ["replayed", "replayed"],
      ["unavailable", "verifier unavailable"]];
    const SVGNS = "http://www.w3.org/2000/svg";
    const svg = (tag, attrs) => {
      const e = document.createElementNS(SVGNS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      return e;
    };
    function chart(minutes) {
      const w = 600, h = 90, bw = w / Math.max(1, minutes.length);
      const max = Math.max(1, ...minutes.map(m => m.verified + m.rejected));
      const s = svg("svg", {class: "chart", width: w, height: h + 16, viewBox: `0 0 ${w} ${h + 16}`, role: "img"});
      const title = svg("title", {}); title.textContent = "requests per minute, last hour: verified (green), rejected (red)";
      s.append(title);
      minutes.forEach((m, i) => {
        const vh = h * m.verified / max, rh = h * m.rejected / max, x = i * bw;
        if (m.rejected) s.append(svg("rect", {x, y: h - rh, width: bw - 1, height: rh, fill: "#d9534f"}));
        if (m.verified) s.append(svg("rect", {x, y: h - rh - vh, width: bw - 1, height: vh, fill: "#5cb85c"}));
      });
      s.append(svg("line", {x1: 0, y1: h, x2: w, y2: h, stroke: "#999"}));
      const label = svg("text", {x: 0, y: h + 13, "font-size": 11, fill: "#666"});
      label.textContent = `last 60 minutes · peak ${max.toLocaleString("en-US")}/min`;
      s.append(label);
      return s;
    }
    function windowTable(route) {
      const t = $("table", {}, $("tr", {}, $("th", {}, "outcome"), $("th", {}, "last hour"), $("th", {}, "last day")));
      for (const [key, label] of CATS) {
        t.append($("tr", {}, $("td", {}, label), $("td", {}, stat(`last_hour.${key}`, route.last_hour[key])),
                 $("td", {}, stat(`last_day.${key}`, route.last_day[key]))));
      }
      const reasons = new Set([...Object.keys(route.last_hour.invalid), ...Object.keys(route.last_day.invalid)]);
      for (const r of [...reasons].sort()) {
        const td = w => route[w].invalid[r] === undefined ? $("td", {}, "0")
          : $("td", {}, stat(`${w}.invalid.${r}`, route[w].invalid[r]));
        t.append($("tr", {}, $("td", {}, `invalid: ${r}`), td("last_hour"), td("last_day")));
      }
      return t;
    }
    function topList(title, rows, key) {
      const t = $("table", {}, $("tr", {}, $("th", {}, title), $("th", {}, "last hour")));
      if (!rows.length) t.append($("tr", {}, $("td", {class: "muted"}, "none"), $("td", {}, "")));
      for (const r of rows) t.append($("tr", {}, $("td", {}, r[key]), $("td", {}, fmt(r.count))));
      return t;
    }
    function routeSection(route) {
      const monitor = route.mode === "monitor";
      const judged = route.last_hour.verified + CATS.slice(1).reduce((n, [k]) => n + route.last_hour[k], 0) +
        Object.values(route.last_hour.invalid).reduce((a, b) => a + b, 0);
      const pct = stat("would_reject_percent", route.would_reject_percent, `${route.would_reject_percent} %`);
      pct.className = "big " + (route.would_reject_percent > 0 ? "bad" : "ok");
      return $("section", {class: "route", "data-route": route.name},
        $("h2", {}, route.name, " ", stat("mode", route.mode, route.mode)),
        $("div", {class: "muted"}, "verifiers: ", route.verifiers.join(", ")),
        $("p", {}, pct, " ", monitor ? "of requests would be rejected if enforced now" : "of requests rejected",
          $("span", {class: "muted"}, ` (last hour, ${judged.toLocaleString("en-US")} judged)`)),
        chart(route.minutes),
        $("div", {class: "cols"}, windowTable(route), topList("top reasons", route.top_reasons, "reason"),
          topList("top app ids (verified)", route.top_app_ids, "app_id")));
    }
    function render(s) {
      document.getElementById("generated-at").setAttribute("data-value", JSON.stringify(s.generated_at));
      document.getElementById("generated-at").textContent = s.generated_at;
      const routes = document.getElementById("routes");
      routes.replaceChildren(...s.routes.map(routeSection));
      if (!s.routes.length) routes.append($("p", {class: "muted"}, "No route has verifiers."));
      const ks = document.getElementById("key-sets");
      ks.replaceChildren($("tr", {}, $("th", {}, "verifier"), $("th", {}, "age (s)"), $("th", {}, "next refresh (s)"),
        $("th", {}, "failures in a row"), $("th", {}, "last error")));
      for (const k of s.key_sets) {
        const err = stat("last_error", k.last_error);
        if (k.last_error) err.className = "bad";
        ks.append($("tr", {"data-key-set": k.verifier}, $("td", {}, k.verifier), $("td", {}, stat("age_seconds", k.age_seconds)),
          $("td", {}, stat("next_refresh_seconds", k.next_refresh_seconds)), $("td", {}, fmt(k.consecutive_failures)), $("td", {}, err)));
      }
      if (!s.key_sets.length) ks.append($("tr", {}, $("td", {class: "muted"}, "no key sets")));
      const st = document.getElementById("state");
      if (s.state) {
        const ready = stat("ready", s.state.ready, s.state.ready ? "ready" : "NOT READY");
        ready.className = s.state.ready ? "ok" : "bad";
        st.replaceChildren("backend ", stat("backend", s.state.backend, s.state.backend), " · ", ready,
          s.state.last_error ? " · " : "", stat("last_error", s.state.last_error, s.state.last_error || ""));
      } else st.replaceChildren($("span", {class: "muted"}, "no state store configured"));
      const cfg = document.getElementById("config");
      const rl = $("table", {}, $("tr", {}, $("th", {}, "reload"), $("th", {}, "result"), $("th", {}, "hash"), $("th", {}, "error")));
      for (const r of [...s.config.reloads].reverse()) {
        rl.append($("tr", {}, $("td", {}, r.at), $("td", {class: r.result === "success" ? "ok" : "bad"}, r.result),
          $("td", {}, r.hash), $("td", {}, r.error || "")));
      }
      cfg.replaceChildren("hash ", stat("hash", s.config.hash, s.config.hash), " · applied ", s.config.loaded_at || "–",
        s.config.reloads.length ? rl : $("p", {class: "muted"}, "no reloads"));
      document.getElementById("status").textContent = "";
    }
    async function refresh() {
      try {
        const r = await fetch("/stats", {cache: "no-store"});
        if (!r.ok) throw new Error(`GET /stats: ${r.status}`);
        render(await r.json());
      } catch (e) {
        document.getElementById("status").textContent = `update failed: ${e.message}; retrying`;
      }
    }
    refresh();
    setInterval(refresh, 5000);
    """

    static let html = """
    <!doctype html>
    <html lang="en"><head><meta charset="utf-8"><title>attest-gateway · rollout</title>
    <meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
    <style>\(style)</style></head>
    <body><h1>attest-gateway rollout view</h1>
    <div class="muted">generated <span id="generated-at"></span> · updates every 5 s ·
    numbers are this process's (JSON: <a href="/stats">/stats</a>, fleet: <a href="/metrics">/metrics</a>)
    <span id="status" class="bad"></span></div>
    <div id="routes"></div>
    <h2>Key sets</h2><table id="key-sets"></table>
    <h2>State store</h2><div id="state"></div>
    <h2>Configuration</h2><div id="config"></div>
    <script>\(script)</script></body></html>
    """

    /// Only this page's own script and style run; it talks to its own origin only.
    static let contentSecurityPolicy = "default-src 'none'; script-src '\(hashSource(script))'; style-src '\(hashSource(style))'; " +
        "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    private static func hashSource(_ text: String) -> String {
        "sha256-" + StandardBase64.encode(SHA256Hasher.hash(Array(text.utf8)))
    }
}
