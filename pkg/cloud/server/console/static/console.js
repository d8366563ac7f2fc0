// fakecloud console: polls the fake cloud's public API and draws it; admin forms call the same
// API with the token typed in (kept in this page's memory, never sent anywhere but this origin).
// Plain DOM, no library, no build step. Every value from the server goes in through
// textContent or attributes, never as HTML.
"use strict";

(() => {
  const params = new URLSearchParams(location.search);
  const interval = Math.min(Math.max(Number(params.get("interval")) || 1000, 200), 60000);
  const historyMs = 5 * 60 * 1000;
  const maxEvents = 300;
  const GiB = 1024 * 1024 * 1024;

  const state = {
    token: new URLSearchParams(location.hash.slice(1)).get("token") || "",
    instances: [], quotas: null, faults: [], faultsMore: false, scenarios: [],
    lastSeq: null, events: [], nodes: null, debug: {}, history: {},
    // cluster is GET /ui/cluster's last answer; clusterOff once it said the fake cloud has
    // no kubeconfig (then the page stops asking).
    cluster: null, clusterOff: false,
    revision: 0, spec: null,
  };

  const $ = (sel) => document.querySelector(sel);

  // el builds an element: attrs are attributes (class, data-*, ...), children nodes or text.
  function el(tag, attrs, ...children) {
    const e = tag.startsWith("svg:")
      ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
      : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  class APIError extends Error {
    constructor(status, code, message) {
      super(code ? `${code}: ${message}` : `HTTP ${status}: ${message}`);
      this.status = status;
      this.code = code;
    }
  }

  // api calls the fake cloud on this origin (relative paths: works behind a path prefix too).
  // api calls the fake cloud; body is sent as JSON, or as it is when it is a string (YAML).
  async function api(method, path, body) {
    const headers = {};
    if (state.token) headers.Authorization = "Bearer " + state.token;
    const init = { method, headers, cache: "no-store" };
    if (typeof body === "string") {
      headers["Content-Type"] = "application/yaml";
      init.body = body;
    } else if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (!resp.ok) {
      throw new APIError(resp.status, data && data.code, (data && data.message) || text.slice(0, 200));
    }
    return data;
  }

  let toastTimer = 0;
  function toast(msg, isError) {
    const t = $("#toast");
    t.textContent = msg;
    t.className = isError ? "error" : "";
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, isError ? 8000 : 3000);
  }

  // authProblem says what is wrong with the token for an answer of status 401 or 403, or
  // returns "" for any other status: no token given is not the same as a token the fake
  // cloud rejected (unknown: 401; a role too weak: 403), and each has its own remedy.
  function authProblem(status, need) {
    if (status !== 401 && status !== 403) return "";
    if (!state.token) return `no token given: enter ${need} above`;
    if (status === 401) return `token rejected (401): the fake cloud does not know this token; enter ${need} above`;
    return `token rejected (403): its role may not do this; enter ${need} above`;
  }

  // admin runs one change and reports its outcome; 401/403 say what is wrong with the token.
  async function admin(what, fn) {
    try {
      await fn();
      toast(what + ": done");
      await tick();
      return true;
    } catch (e) {
      const auth = authProblem(e.status, "an admin token");
      toast(what + " failed: " + (auth ? auth + " (" + e.message + ")" : e.message), true);
      return false;
    }
  }

  function setStatus(kind, text) {
    const s = $("#status");
    s.dataset.state = kind;
    s.textContent = text;
  }

  // ---- instances ----

  const cards = new Map();

  function segment(kind, n, title) {
    const s = el("div", { class: "seg " + kind, "data-kind": kind, "data-count": n, title });
    s.style.flexGrow = String(n);
    s.style.flexBasis = "0";
    // One cell per slot while cells stay wider than a few pixels.
    const cells = n <= 64 ? n : 0;
    for (let i = 0; i < cells; i++) s.append(el("i"));
    return s;
  }

  function instanceNumbers(inst) {
    const limit = inst.attachLimit;
    const oob = inst.outOfBandSlots;
    const attached = (inst.attachments || []).length;
    // Every attachment holds a slot from the start of attaching to the end of detaching; these
    // say how many of them are in a transition (GET /v1/instances counts them).
    const attaching = inst.attaching || 0, detaching = inst.detaching || 0, failed = inst.failed || 0;
    return {
      limit, oob, attached, attaching, detaching, failed, steady: Math.max(0, attached - attaching - detaching - failed),
      free: Math.max(0, limit - oob - attached), over: Math.max(0, oob + attached - limit),
    };
  }

  // An input is dirty when its value differs from the last value the page filled in: the
  // page then leaves it alone until the change is applied.
  const dirty = (input) => input.value !== (input.dataset.filled ?? "");
  function fill(input, v, force) {
    if (force || (!dirty(input) && document.activeElement !== input)) {
      input.value = String(v);
      input.dataset.filled = String(v);
    }
  }

  function newCard(id) {
    const limit = el("input", { name: "attachLimit", type: "number", step: "1", min: "1" });
    const oob = el("input", { name: "outOfBandSlots", type: "number", step: "1", min: "0" });
    const clear = el("button", { type: "button", name: "clearAttachLimit" }, "clear override");
    const form = el("form", { class: "admin", "data-instance": id },
      el("label", {}, "attach limit", limit),
      el("label", {}, "out of band", oob),
      el("button", { type: "submit" }, "apply"), clear);
    const c = {
      root: el("div", { class: "card instance", "data-instance": id }),
      title: el("small"),
      bar: el("div", { class: "bar", "data-instance": id }),
      numbers: el("div", { class: "numbers" }),
      form, limit, oob, clear,
    };
    c.root.append(el("h3", {}, id, c.title), c.bar, c.numbers, form);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const patch = {};
      if (dirty(limit) && limit.value !== "") patch.attachLimit = Number(limit.value);
      if (dirty(oob) && oob.value !== "") patch.outOfBandSlots = Number(oob.value);
      if (Object.keys(patch).length === 0) { toast("change the limit or out-of-band slots first", true); return; }
      if (await admin(`PATCH /v1/instances/${id} ${JSON.stringify(patch)}`,
        () => api("PATCH", "v1/instances/" + encodeURIComponent(id), patch))) {
        fillInputs(c, state.instances.find((i) => i.id === id), true);
      }
    });
    clear.addEventListener("click", () => admin(`PATCH /v1/instances/${id} clearAttachLimit`,
      () => api("PATCH", "v1/instances/" + encodeURIComponent(id), { clearAttachLimit: true })));
    return c;
  }

  function fillInputs(c, inst, force) {
    if (!inst) return;
    fill(c.limit, inst.attachLimit, force);
    fill(c.oob, inst.outOfBandSlots, force);
    c.clear.hidden = inst.attachLimitOverride === undefined || inst.attachLimitOverride === null;
  }

  function renderInstances() {
    const root = $("#instances");
    const seen = new Set();
    for (const inst of state.instances) {
      seen.add(inst.id);
      let c = cards.get(inst.id);
      if (!c) {
        c = newCard(inst.id);
        cards.set(inst.id, c);
        root.append(c.root);
      }
      const n = instanceNumbers(inst);
      c.title.textContent = `${inst.instanceType} · ${inst.zone}` + (inst.attachLimitOverride != null ? " · limit overridden" : "");
      const scale = Math.max(n.limit, n.oob + n.attached);
      // The driver's slots within the limit, split by state: transitions first, so a held
      // detach stays visible when the limit is lowered below use.
      let visible = Math.max(0, Math.min(n.attached, n.limit - Math.min(n.oob, n.limit)));
      const take = (k) => { const v = Math.min(k, visible); visible -= v; return v; };
      const attaching = take(n.attaching), detaching = take(n.detaching), failed = take(n.failed), steady = take(n.steady);
      c.bar.replaceChildren(
        segment("oob", Math.min(n.oob, scale), `${n.oob} out of band`),
        segment("attached", steady, `${n.steady} attached by this driver`),
        segment("attaching", attaching, `${n.attaching} attaching`),
        segment("detaching", detaching, `${n.detaching} detaching`),
        segment("failed", failed, `${n.failed} failed detach (still holding a slot)`),
        segment("free", n.free, `${n.free} free`),
        segment("over", n.over, `${n.over} over the limit`));
      c.bar.dataset.limit = n.limit;
      const nodeInfo = state.debug[inst.id];
      const nums = [
        ["limit", n.limit], ["out of band", n.oob], ["attached", n.attached],
        ["attaching", n.attaching], ["detaching", n.detaching], ["free", n.free],
      ];
      if (n.failed > 0) nums.push(["failed detach", n.failed]);
      if (n.over > 0) nums.push(["over", n.over]);
      c.numbers.replaceChildren(...nums.map(([label, v]) =>
        el("span", { "data-field": label.replace(/ /g, "-") }, label + " ", el("b", {}, v))));
      const cn = clusterNode(inst.id);
      if (cn) {
        c.numbers.append(el("span", { class: "csinode", "data-field": "csinode" }, "CSINode " + cn.name + " ",
          el("b", {}, cn.allocatable ?? "—")));
      }
      if (nodeInfo && nodeInfo.ok) {
        c.numbers.append(el("span", { class: "reported", "data-field": "reported" }, "reported ", el("b", {}, nodeInfo.data.reported),
          " ", el("span", { class: "badge mode-" + nodeInfo.data.mode }, nodeInfo.data.mode)));
      }
      fillInputs(c, inst, false);
    }
    for (const [id, c] of cards) {
      if (!seen.has(id)) { c.root.remove(); cards.delete(id); }
    }
    $("#instance-ids").replaceChildren(...state.instances.map((i) => el("option", { value: i.id })));
  }

  // ---- quotas ----

  function renderQuotas() {
    const q = state.quotas;
    if (!q) return;
    const rows = [
      ["attachments", q.attachments, (v) => String(v)],
      ["volumes", q.volumes, (v) => String(v)],
      ["capacityBytes", q.capacityBytes, (v) => (v / GiB).toFixed(v % GiB === 0 ? 0 : 2) + " GiB"],
    ];
    $("#quotas").replaceChildren(...rows.map(([name, quota, fmt]) => {
      const pct = quota.limit > 0 ? Math.min(100, (100 * quota.used) / quota.limit) : 100;
      const bar = el("div");
      bar.style.width = pct + "%";
      return el("div", { class: "quota", "data-quota": name },
        el("div", { class: "label" }, el("span", {}, name),
          el("span", {}, el("b", { "data-field": "used" }, fmt(quota.used)), " used of ",
            el("b", { "data-field": "limit" }, fmt(quota.limit)),
            name === "attachments" ? el("span", { "data-field": "headroom" }, ` · headroom ${Math.max(0, quota.limit - quota.used)}`) : null)),
        el("div", { class: "meter" + (quota.used >= quota.limit ? " full" : "") }, bar));
    }));
    const form = $("#quota-form");
    for (const [name, v] of [["attachments", q.attachments.limit], ["volumes", q.volumes.limit], ["capacityGiB", q.capacityBytes.limit / GiB]]) {
      fill(form.elements[name], v, false);
    }
  }

  function setupQuotaForm() {
    const form = $("#quota-form");
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const patch = {};
      const e = form.elements;
      if (dirty(e.attachments)) patch.attachments = Number(e.attachments.value);
      if (dirty(e.volumes)) patch.volumes = Number(e.volumes.value);
      if (dirty(e.capacityGiB)) patch.capacityBytes = Math.round(Number(e.capacityGiB.value) * GiB);
      if (Object.keys(patch).length === 0) { toast("change a limit first", true); return; }
      if (await admin("PATCH /v1/quotas " + JSON.stringify(patch), () => api("PATCH", "v1/quotas", patch))) {
        const q = state.quotas;
        fill(e.attachments, q.attachments.limit, true);
        fill(e.volumes, q.volumes.limit, true);
        fill(e.capacityGiB, q.capacityBytes.limit / GiB, true);
      }
    });
  }

  // setCells updates a table row in place: one cell per value, a value being text, a node
  // (a button, a badge) or [value, className]. Cells and their buttons are kept, not rebuilt,
  // so a click never lands on an element the last poll replaced.
  function setCells(tr, values) {
    while (tr.children.length < values.length) tr.append(el("td"));
    values.forEach((v, i) => {
      const td = tr.children[i];
      let cls = "";
      if (Array.isArray(v)) [v, cls] = v;
      if (td.className !== cls) td.className = cls;
      if (v instanceof Node) {
        if (td.firstChild !== v || td.childNodes.length !== 1) td.replaceChildren(v);
      } else if (td.textContent !== String(v)) {
        td.textContent = String(v);
      }
    });
  }

  // ---- faults ----

  const faultRows = new Map();

  function renderFaults() {
    const tbody = $("#faults tbody");
    const seen = new Set();
    for (const f of state.faults) {
      seen.add(f.id);
      let row = faultRows.get(f.id);
      if (!row) {
        const del = el("button", { type: "button", "data-fault": f.id }, "delete");
        del.addEventListener("click", () => admin("DELETE /v1/faults/" + f.id,
          () => api("DELETE", "v1/faults/" + encodeURIComponent(f.id))));
        row = { tr: el("tr", { "data-fault": f.id }), del };
        faultRows.set(f.id, row);
        tbody.append(row.tr);
      }
      const expires = f.expiresAt ? Math.max(0, Math.round((Date.parse(f.expiresAt) - Date.now()) / 1000)) + " s" : "never";
      const limit = f.count ? `${f.fired}/${f.count}` : String(f.fired);
      setCells(row.tr, [f.id, f.operation, f.instanceId || "any", f.volumeId || "any",
        [f.error || "—", f.error ? "err" : ""], f.latencyMs ? f.latencyMs + " ms" : "—",
        f.probability ?? 1, limit + (f.afterCount ? ` (after ${f.afterCount})` : ""), expires, row.del]);
    }
    for (const [id, row] of faultRows) {
      if (!seen.has(id)) { row.tr.remove(); faultRows.delete(id); }
    }
    $("#faults-empty").hidden = state.faults.length > 0;
    $("#faults-empty").textContent = state.faultsMore ? "" : "No fault rules.";
  }

  async function setupFaultForm() {
    const form = $("#fault-form");
    // The operations and error codes come from the server's own OpenAPI document.
    let ops = ["*"], codes = [];
    try {
      const spec = await api("GET", "openapi.json");
      ops = spec.components.schemas.FaultRule.properties.operation.enum;
      codes = spec.components.schemas.Error.properties.code.enum;
    } catch (e) {
      toast("openapi.json: " + e.message, true);
    }
    form.elements.operation.replaceChildren(...ops.map((o) => el("option", { value: o }, o === "*" ? "* (every operation)" : o)));
    form.elements.operation.value = ops.includes("AttachVolume") ? "AttachVolume" : ops[0];
    form.elements.error.replaceChildren(el("option", { value: "" }, "none (latency only)"),
      ...codes.map((c) => el("option", { value: c }, c)));
    form.elements.error.value = codes.includes("Unavailable") ? "Unavailable" : "";
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const e = form.elements;
      const rule = { operation: e.operation.value };
      for (const k of ["instanceId", "volumeId"]) if (e[k].value.trim()) rule[k] = e[k].value.trim();
      if (e.error.value) rule.error = e.error.value;
      for (const k of ["latencyMs", "count", "ttlSeconds"]) if (e[k].value !== "") rule[k] = Number(e[k].value);
      if (e.probability.value !== "") rule.probability = Number(e.probability.value);
      await admin("POST /v1/faults " + JSON.stringify(rule), () => api("POST", "v1/faults", rule));
    });
    $("#faults-clear").addEventListener("click", () => admin("DELETE /v1/faults", () => api("DELETE", "v1/faults")));
  }

  // ---- scenarios ----

  const scenarioRows = new Map();

  function renderScenarios() {
    const tbody = $("#scenarios tbody");
    const seen = new Set();
    for (const sc of state.scenarios) {
      seen.add(sc.id);
      let row = scenarioRows.get(sc.id);
      if (!row) {
        const cancel = el("button", { type: "button", "data-scenario": sc.id }, "cancel");
        cancel.addEventListener("click", () => admin("DELETE /v1/scenarios/" + sc.id,
          () => api("DELETE", "v1/scenarios/" + encodeURIComponent(sc.id))));
        row = { tr: el("tr", { "data-scenario": sc.id }), cancel };
        scenarioRows.set(sc.id, row);
        tbody.prepend(row.tr);
      }
      row.cancel.hidden = sc.state !== "running";
      row.tr.dataset.state = sc.state;
      if (!row.badge) row.badge = el("span");
      row.badge.className = "badge state-" + sc.state;
      row.badge.textContent = sc.state;
      row.badge.title = sc.error || ""; // why a failed run failed (GET /v1/scenarios's error)
      setCells(row.tr, [sc.id, sc.name, row.badge, `${sc.done}/${sc.steps}`, [sc.failed, sc.failed ? "err" : ""],
        sc.endedAt ? "ended " + new Date(sc.endedAt).toTimeString().slice(0, 8) : "started " + new Date(sc.startedAt).toTimeString().slice(0, 8),
        sc.expect || "", row.cancel]);
    }
    for (const [id, row] of scenarioRows) {
      if (!seen.has(id)) { row.tr.remove(); scenarioRows.delete(id); }
    }
    $("#scenarios").hidden = state.scenarios.length === 0;
  }

  function setupScenarioForm() {
    const form = $("#scenario-form");
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const text = form.elements.yaml.value;
      if (!text.trim()) { toast("paste a scenario first (examples/scenarios/*.yaml)", true); return; }
      await admin("POST /v1/scenarios", () => api("POST", "v1/scenarios", text));
    });
  }

  // ---- events ----

  function eventClass(type) {
    if (type.startsWith("Fault")) return "ev-fault";
    if (type.startsWith("Quota")) return "ev-quota";
    if (type.startsWith("Instance")) return "ev-instance";
    if (/Attach|Detach/.test(type)) return "ev-attach";
    return "";
  }

  function eventLine(ev, isNew) {
    const t = new Date(ev.time);
    const hms = isNaN(t) ? "" : t.toTimeString().slice(0, 8) + "." + String(t.getMilliseconds()).padStart(3, "0");
    const parts = [];
    if (ev.instanceId) parts.push("instance=" + ev.instanceId);
    if (ev.volumeId) parts.push("volume=" + ev.volumeId);
    if (ev.attached != null) parts.push(`attached=${ev.attached}` + (ev.limit != null ? `/${ev.limit}` : ""));
    if (ev.detail) parts.push(ev.detail);
    return el("li", { class: isNew ? "new" : "", "data-seq": ev.seq, "data-type": ev.type },
      el("span", { class: "t" }, hms), el("span", { class: "t" }, "rev " + ev.revision),
      el("span", { class: "type " + eventClass(ev.type) }, ev.type), el("span", {}, parts.join(" ")));
  }

  function renderEvents(fresh) {
    const filter = $("#events-filter").value.trim().toLowerCase();
    const list = $("#events");
    const match = (ev) => !filter || JSON.stringify(ev).toLowerCase().includes(filter);
    if (fresh === null) {
      list.replaceChildren(...state.events.filter(match).reverse().map((ev) => eventLine(ev, false)));
      return;
    }
    for (const ev of fresh) if (match(ev)) list.prepend(eventLine(ev, true));
    while (list.children.length > maxEvents) list.lastElementChild.remove();
  }

  async function pollEvents() {
    if (state.lastSeq === null) {
      // Start from the last few dozen revisions: a huge sinceRevision returns no events and
      // the current revision.
      const head = await api("GET", "v1/events?sinceRevision=18446744073709551615&maxResults=1");
      const page = await api("GET", `v1/events?sinceRevision=${Math.max(0, head.revision - 40)}&maxResults=1000`);
      state.events = page.events.slice(-maxEvents);
      state.lastSeq = page.events.length ? page.events[page.events.length - 1].seq : 0;
      state.revision = page.revision;
      renderEvents(null);
      return;
    }
    const page = await api("GET", `v1/events?sinceSeq=${state.lastSeq}&maxResults=1000`);
    state.revision = page.revision;
    if (page.events.length === 0) return;
    state.lastSeq = page.events[page.events.length - 1].seq;
    state.events = state.events.concat(page.events).slice(-maxEvents);
    renderEvents(page.events);
  }

  // ---- node plugins ----

  const nodeCards = new Map();

  // truth is the value the driver's policy converges to for the cloud's current state:
  // max(1, min(limit − out of band, attached + quota share)), the share split evenly across
  // instances when the plugin's --capacity-quota-share is "even".
  function truth(inst, share) {
    if (!inst || !state.quotas) return null;
    const n = instanceNumbers(inst);
    const headroom = Math.max(0, state.quotas.attachments.limit - state.quotas.attachments.used);
    const quota = share === "even" ? Math.ceil(headroom / Math.max(1, state.instances.length)) : headroom;
    return Math.max(1, Math.min(n.limit - n.oob, n.attached + quota));
  }

  async function pollNodes() {
    const now = Date.now();
    if (!state.nodes) return;
    await Promise.all(state.nodes.map(async (node) => {
      let info;
      try {
        info = { ok: true, data: await api("GET", "ui/nodes/" + encodeURIComponent(node.name) + "/capacity") };
      } catch (e) {
        info = { ok: false, error: e.message };
      }
      state.debug[node.name] = info;
      const h = (state.history[node.name] = state.history[node.name] || []);
      const inst = state.instances.find((i) => i.id === node.name);
      const share = info.ok && info.data.config ? info.data.config.quotaShare : "";
      const cn = clusterNode(node.name);
      h.push({
        t: now, truth: truth(inst, share),
        reported: info.ok ? info.data.reported : null,
        csinode: cn ? cn.allocatable : null,
        // The cluster's side of the node (GET /ui/cluster): the driver's VolumeAttachments
        // attached and not yet, and the pods bound to it that are still Pending.
        vaAttached: cn ? cn.attached : null,
        vaAttaching: cn ? cn.attaching : null,
        pending: cn ? cn.pending.length : null,
        mode: info.ok ? info.data.mode : "unreachable",
      });
      while (h.length && h[0].t < now - historyMs) h.shift();
    }));
  }

  // chartSeries are the lines of a node's chart, back to front: history key and class (the
  // class styles the line and names its legend key, "line-" + class).
  const chartSeries = [
    ["pending", "pending"], ["vaAttaching", "va-attaching"], ["vaAttached", "va-attached"],
    ["csinode", "csinode"], ["reported", "reported"], ["truth", "truth"],
  ];
  // baseSeries are drawn (empty) even before they have a value: the plugin's side.
  const baseSeries = new Set(["csinode", "reported", "truth"]);

  function chart(h, now) {
    const W = 640, H = 190, left = 40, right = 8, top = 8, band = 12, bottom = 22;
    const plotH = H - top - bottom - band - 4;
    const vals = h.flatMap((p) => chartSeries.map(([key]) => p[key])).filter((v) => v !== null && v !== undefined);
    const ymax = Math.max(2, ...vals) + 1;
    // The window grows with the history, from 30 s to 5 min, so a fresh page is not empty.
    const span = Math.min(historyMs, Math.max(30000, h.length ? now - h[0].t : 0));
    const x = (t) => left + ((t - (now - span)) / span) * (W - left - right);
    const y = (v) => top + plotH - (v / ymax) * plotH;
    const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": "capacity over time" });
    const ticks = ymax <= 10 ? 1 : Math.ceil(ymax / 5);
    for (let v = 0; v <= ymax; v += ticks) {
      svg.append(el("svg:line", { class: "grid", x1: left, x2: W - right, y1: y(v), y2: y(v) }),
        el("svg:text", { class: "axis", x: left - 4, y: y(v) + 3, "text-anchor": "end" }, v));
    }
    const mid = top + plotH / 2;
    svg.append(el("svg:text", { class: "axis", x: 10, y: mid, "text-anchor": "middle", transform: `rotate(-90 10 ${mid})` },
      h.some((p) => p.vaAttached !== null && p.vaAttached !== undefined) ? "slots · VAs · pods" : "slots"));
    svg.append(el("svg:text", { class: "axis", x: left - 4, y: top + plotH + 4 + band - 2, "text-anchor": "end" }, "mode"));
    for (let i = 4; i >= 0; i--) {
      const ago = (span * i) / 4;
      const label = i === 0 ? "now" : ago >= 60000 ? `−${(ago / 60000).toFixed(ago % 60000 ? 1 : 0)} min` : `−${Math.round(ago / 1000)} s`;
      svg.append(el("svg:text", { class: "axis", x: x(now - ago), y: H - 2, "text-anchor": i === 0 ? "end" : i === 4 ? "start" : "middle" }, label));
    }
    // Step lines: a value holds until the next sample.
    const step = (key) => {
      let d = "", prev = null;
      for (const p of h) {
        const v = p[key];
        if (v === null || v === undefined) { prev = null; continue; }
        d += prev === null ? `M${x(p.t).toFixed(1)},${y(v).toFixed(1)}` : `H${x(p.t).toFixed(1)}V${y(v).toFixed(1)}`;
        prev = v;
      }
      if (prev !== null) d += `H${x(now).toFixed(1)}`;
      return d;
    };
    // Back to front (chartSeries): the truth goes on top, dashed, so it stays visible where
    // the plugin reports it exactly. A series with no value yet (no cluster view) draws nothing.
    // data-last is the series' newest value, for the reader's eye and the browser test.
    for (const [key, cls] of chartSeries) {
      const d = step(key);
      const last = h.length ? h[h.length - 1][key] : null;
      if (!d && !baseSeries.has(key)) continue;
      svg.append(el("svg:path", { class: cls, "data-series": cls, "data-last": last ?? "", d: d || "M0,0" }));
    }
    const by = top + plotH + 4;
    h.forEach((p, i) => {
      const x0 = x(p.t), x1 = i + 1 < h.length ? x(h[i + 1].t) : x(now);
      svg.append(el("svg:rect", { class: "mode-" + p.mode, x: x0, y: by, width: Math.max(1, x1 - x0), height: band },
        el("svg:title", {}, p.mode)));
    });
    return svg;
  }

  function renderNodes() {
    if (!state.nodes || state.nodes.length === 0) return;
    $("#nodes-section").hidden = false;
    const now = Date.now();
    for (const node of state.nodes) {
      let c = nodeCards.get(node.name);
      if (!c) {
        c = { root: el("div", { class: "card node", "data-node": node.name }), numbers: el("div", { class: "numbers" }), plot: el("div") };
        c.root.append(el("h3", {}, node.name, el("small", {}, node.url + "/debug/capacity")), c.plot, c.numbers);
        nodeCards.set(node.name, c);
        $("#nodes").append(c.root);
      }
      const h = state.history[node.name] || [];
      const last = h[h.length - 1];
      const info = state.debug[node.name];
      c.plot.replaceChildren(chart(h, now));
      if (!info) continue;
      if (!info.ok) {
        c.numbers.replaceChildren(el("span", { class: "err" }, "unreachable: " + info.error));
        continue;
      }
      const d = info.data;
      const items = [
        ["reported", d.reported], ["target", d.target ?? "—"], ["cloud truth", last && last.truth !== null ? last.truth : "—"],
        ["mode", el("span", { class: "badge mode-" + d.mode }, d.mode)],
      ];
      if (last && last.csinode !== null && last.csinode !== undefined) items.splice(3, 0, ["csinode", last.csinode]);
      if (last && last.vaAttached !== null && last.vaAttached !== undefined) {
        items.push(["VAs attached", last.vaAttached], ["VAs attaching", last.vaAttaching], ["pending pods", last.pending]);
      }
      if (d.lastGoodAgeSeconds !== undefined && d.lastGoodAgeSeconds >= 0) items.push(["last good", d.lastGoodAgeSeconds.toFixed(1) + " s ago"]);
      if (d.stabilityWindow) items.push(["window", d.stabilityWindow + (d.damping ? ` (damping ${d.damping})` : "")]);
      if (d.revision) items.push(["revision", d.revision]);
      if (d.lastErrorClass) items.push(["last error", d.lastErrorClass]);
      if (d.reason) items.push(["static because", d.reason]);
      // The node plugin's capacity decision at start and its reason (docs/compatibility.md).
      if (d.decision) items.push(["decided", d.decision.decision + " (" + d.decision.reason + ")"]);
      c.numbers.replaceChildren(...items.map(([k, v]) => el("span", { "data-field": k.replace(/ /g, "-") }, k + " ", el("b", {}, v))));
    }
  }

  // ---- the Kubernetes cluster (fakecloud --console-kubeconfig) ----

  // clusterNode is the cluster's node whose CSINode names instance id as the driver's node ID.
  function clusterNode(id) {
    if (!state.cluster || !state.cluster.enabled) return null;
    return state.cluster.nodes.find((n) => n.nodeId === id) || null;
  }

  async function pollCluster() {
    if (state.clusterOff) return;
    const view = await api("GET", "ui/cluster");
    if (!view.enabled) { state.clusterOff = true; return; }
    state.cluster = view;
  }

  function podLine(p) {
    return el("li", { "data-pod": p.namespace + "/" + p.name },
      el("b", {}, p.namespace + "/" + p.name), " ", el("span", { class: "reason" }, p.reason || "Pending"),
      p.message ? el("span", { class: "msg" }, " " + p.message) : null);
  }

  function renderCluster() {
    const v = state.cluster;
    if (!v) return;
    $("#cluster-section").hidden = false;
    $("#cluster-driver").textContent = v.driver;
    const err = $("#cluster-error");
    err.hidden = !v.error && !(v.truncated && v.truncated.length);
    err.textContent = v.error ? "cannot read the cluster: " + v.error
      : (v.truncated && v.truncated.length ? "first 500 only of: " + v.truncated.join(", ") : "");
    $("#cluster-nodes").replaceChildren(...v.nodes.map((n) => {
      const inst = state.instances.find((i) => i.id === n.nodeId);
      const info = state.debug[n.nodeId];
      const share = info && info.ok && info.data.config ? info.data.config.quotaShare : "";
      const t = inst ? truth(inst, share) : null;
      const reported = info && info.ok ? info.data.reported : null;
      const cells = [
        n.name, n.nodeId || "— (driver not registered)",
        [n.allocatable ?? "—", "csinode"],
        reported ?? "—", t ?? "—",
        `${n.attached}` + (n.attaching ? ` + ${n.attaching} attaching` : ""),
        [n.attachErrors ? `${n.attachErrors}: ${n.lastAttachError}` : "0", n.attachErrors ? "err" : ""],
        n.pending.length ? el("ul", { class: "pods" }, ...n.pending.map(podLine)) : "none",
      ];
      // A CSINode count apart from what the plugin reports is the stale count KEP-4876 fixes.
      const stale = n.allocatable !== null && reported !== null && n.allocatable !== reported;
      const tr = el("tr", { "data-cluster-node": n.name, "data-instance": n.nodeId || "", class: stale ? "stale" : "" });
      for (const c of cells) {
        const [v, cls] = Array.isArray(c) ? c : [c, ""];
        tr.append(el("td", { class: cls }, v));
      }
      return tr;
    }));
    $("#cluster-empty").hidden = v.nodes.length > 0 || Boolean(v.error);
    const un = $("#unscheduled");
    un.replaceChildren(...v.unscheduled.map(podLine));
    $("#unscheduled-none").hidden = v.unscheduled.length > 0;
  }

  // ---- the loop ----

  let timer = 0;
  let running = false;

  // tick polls once and schedules the next poll. A call while a poll runs (after a change
  // made from the page) makes the running one poll again at once when it ends, since it may
  // have read some of the state before the change.
  let again = false;
  async function tick() {
    if (running) { again = true; return; }
    running = true;
    clearTimeout(timer);
    try {
      const [inst, quotas, faults, scenarios] = await Promise.all([
        api("GET", "v1/instances"), api("GET", "v1/quotas"), api("GET", "v1/faults?maxResults=1000"), api("GET", "v1/scenarios"),
      ]);
      state.scenarios = scenarios.scenarios;
      state.instances = inst.instances.slice().sort((a, b) => a.id.localeCompare(b.id));
      state.quotas = quotas;
      state.faults = faults.faults;
      state.faultsMore = Boolean(faults.nextPageToken);
      if (state.nodes === null) state.nodes = (await api("GET", "ui/nodes")).nodes;
      await pollEvents();
      await pollCluster();
      await pollNodes();
      renderQuotas();
      renderInstances();
      renderFaults();
      renderScenarios();
      renderNodes();
      renderCluster();
      setStatus("live", `live · revision ${state.revision} · ${new Date().toTimeString().slice(0, 8)}`);
    } catch (e) {
      setStatus("error", authProblem(e.status, "a token (reader or better)") || e.message);
    } finally {
      running = false;
      timer = setTimeout(tick, again ? 0 : interval);
      again = false;
    }
  }

  async function start() {
    $("#token").value = state.token;
    $("#token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      state.token = $("#token").value.trim();
      state.lastSeq = null;
      tick();
    });
    $("#events-filter").addEventListener("input", () => renderEvents(null));
    $("#reset").addEventListener("click", () => {
      if (confirm("POST /v1/reset: back to the seed (volumes, attachments, quotas, fault rules)?")) {
        admin("POST /v1/reset", () => api("POST", "v1/reset"));
      }
    });
    setupQuotaForm();
    setupScenarioForm();
    await setupFaultForm();
    tick();
  }

  start();
})();
