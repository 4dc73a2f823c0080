// Graph explorer: Cytoscape canvas + htmx panels. The view lives in the URL: the focused node (a drill-down,
// pushed to history so Back steps back through them), the selection and the filters (replaced in place).
// Data comes from graph/data as JSON, panels are server-rendered partials. No inline script or style: the CSP
// forbids both, and user text only ever goes through textContent.
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("explorer-config").textContent);
  const FILTER_KEYS = ["graph_et", "graph_nt", "graph_mw", "graph_mc", "graph_ev"];
  // Node types: a shape per family (memory, scope, label, entity) and a colour per type, after Paul Tol's
  // colour-blind-safe palettes, darkened where needed so every one is at least 3:1 against the white canvas;
  // the shape tells families apart where colours come close.
  const NODE_STYLE = {
    memory: ["#4477AA", "ellipse"],
    repo: ["#228833", "round-rectangle"], user: ["#C75A1A", "round-rectangle"],
    memory_type: ["#767676", "round-rectangle"],
    topic: ["#EE3377", "diamond"], category: ["#009988", "diamond"], condition: ["#CC3311", "diamond"],
    person: ["#CC6677", "hexagon"], tool: ["#9C8A00", "hexagon"], concept: ["#268BBF", "hexagon"],
    project: ["#117733", "hexagon"], language: ["#332288", "hexagon"], file: ["#7F7F26", "hexagon"],
    config: ["#2F8F83", "hexagon"], organization: ["#882255", "hexagon"], event: ["#AA4499", "hexagon"],
    bundle: ["#667085", "tag"],
  };
  const nodeStyle = (type) => NODE_STYLE[type] || ["#777777", "octagon"];
  const SIZES = [14, 18, 22, 26, 30, 34, 38, 42, 46];
  // Edge classes (Okabe–Ito hues, darkened to at least 3:1 against the canvas) with a line style each, so
  // they differ without colour too. Lines are drawn opaque: a translucent line loses that contrast.
  const EDGE_STYLE = {
    contradicts: { colour: "#D55E00", line: "dashed", width: 3.5, label: "contradicts" },
    supersedes: { colour: "#0072B2", line: "double", width: 4, label: "supersedes (newer → older)" },
    relationship: { colour: "#B0508F", line: "solid", width: 2, label: "relationship between memories" },
    fact: { colour: "#009E73", line: "solid", width: 2, label: "fact between entities" },
    similarity: { colour: "#1E88C8", line: "dotted", width: 1.5, label: "similar meaning" },
    structural: { colour: "#7B8794", line: "solid", width: 1, label: "belongs to (repo, topic, category, user, entity)" },
  };
  const CANVAS = "#ffffff";
  // Memory types in the order a person reads a hub: what must be followed, what was decided, what is known.
  const TYPE_ORDER = ["rule", "decision", "fact", "skill", "note"];
  const CLASS_ORDER = ["contradicts", "supersedes", "relationship", "fact", "similarity", "structural"];
  const FORCE_QUALITY_MAX = 250; // above this, fcose's draft quality: seconds become a fraction of one
  // Above this, even fcose's draft takes seconds on a small machine (0.8–2.6 s for 2,000 nodes on 2 cores):
  // the overview is laid out as clusters instead (constellation below), in milliseconds.
  const FORCE_MAX = 500;
  // Big views start with labels on their best-connected nodes only; zooming in reveals the rest.
  const BIG = 500;
  const FIRST_LABELS = 80;
  const LIST_MAX = 500;
  const MOBILE_NODES = 60;
  // Labels: 12 graph units, never drawn below 11 px on screen; hubs keep a label at every zoom (their font
  // grows in graph units as the view zooms out, so it stays 12 px on screen).
  const LABEL_FONT = 12;
  const MIN_LABEL_PX = 11;
  const HUB_LABEL_PX = 12;
  const HUBS_LABELLED = 40;
  // An overview keeps this many topics; the rest fold into a bundle beside their repo, opened with a click.
  const TOPICS_KEPT = 8;
  const SEED = 20250101;

  const $ = (id) => document.getElementById(id);
  const form = $("graph-filters");
  const statusEl = $("graph-status");
  const nodeSelect = $("node-select");
  const edgeSelect = $("edge-select");
  const expandButton = $("graph-expand");
  const canvas = $("graph-canvas");
  const findInput = $("find-input");
  const findResults = $("find-results");
  let selectedNode = null;
  let selectedPair = null;
  let labelOrder = [];
  let lastPayload = null;
  let navigator = null;
  let loadToken = 0;

  document.querySelectorAll(".swatch[data-node-type]").forEach((el) => el.appendChild(nodeSwatch(el.dataset.nodeType)));
  document.querySelectorAll(".edge-sample[data-edge-class]").forEach((el) => el.appendChild(edgeSample(el.dataset.edgeClass)));

  const edgeStyles = CLASS_ORDER.map((name) => ({ selector: "edge." + name, style: {
    "line-color": EDGE_STYLE[name].colour, "target-arrow-color": EDGE_STYLE[name].colour,
    "source-arrow-color": EDGE_STYLE[name].colour,
    "line-style": EDGE_STYLE[name].line === "double" ? "solid" : EDGE_STYLE[name].line,
    width: EDGE_STYLE[name].width } }));
  // Cytoscape has no double line: a pale core with a dark outline draws one.
  edgeStyles.push({ selector: "edge.supersedes", style: { "line-color": "#cfe3f5", "line-outline-width": 1.5,
    "line-outline-color": "#0072B2" } });

  const cy = cytoscape({
    container: canvas,
    textureOnViewport: true,
    hideEdgesOnViewport: false,
    motionBlur: false,
    pixelRatio: 1,
    minZoom: 0.03,
    maxZoom: 5,
    style: [
      { selector: "node", style: {
        "background-color": "#777777", shape: "octagon", width: 14, height: 14,
        label: "data(label)", "font-size": LABEL_FONT, "min-zoomed-font-size": MIN_LABEL_PX, "text-valign": "bottom",
        "text-margin-y": 2, "text-max-width": 220, "text-wrap": "ellipsis", color: "#1f2933",
        "text-background-color": "#ffffff", "text-background-opacity": 0.85, "text-background-padding": 1,
        "border-width": 1, "border-color": "#ffffff" } },
      // Hubs: a font in graph units that keeps 12 px on screen at any zoom (set per zoom in cullLabels).
      { selector: "node.hub", style: { "font-size": "data(fs)", "font-weight": "bold", "min-zoomed-font-size": 0 } },
      // Colour, shape and size by class, not by data mappers: elements of one class share one computed style,
      // which is a third of a first frame at 2,000 nodes.
      ...Object.entries(NODE_STYLE).map(([type, [colour, shape]]) => ({ selector: "node.t-" + type,
        style: { "background-color": colour, shape } })),
      ...SIZES.map((size) => ({ selector: "node.s" + size, style: { width: size, height: size } })),
      { selector: "node.nolabel", style: { label: "" } },
      // Big views: no node outline and opaque edges, the cheapest frame Cytoscape can draw.
      { selector: "node.plain", style: { "border-width": 0 } },
      { selector: "node.superseded", style: { opacity: 0.55, "border-style": "dashed", "border-color": "#0072B2",
        "border-width": 2 } },
      { selector: "node.contradicted", style: { "border-color": "#D55E00", "border-width": 3 } },
      { selector: "node.outdated", style: { opacity: 0.6, "border-style": "dashed", "border-color": "#8f3b00", "border-width": 3 } },
      { selector: "node.current", style: { "border-color": "#1a7f37", "border-width": 4, "border-style": "double" } },
      // A hub's 1-hop view: its memories in labelled boxes by type.
      { selector: "node.group", style: { shape: "round-rectangle", "background-color": "#f3f5f7", "background-opacity": 1,
        "border-width": 1, "border-color": "#667085", label: "data(label)", "text-valign": "top", "text-halign": "center",
        "font-size": "data(fs)", "font-weight": "bold", color: "#1f2933", "min-zoomed-font-size": 0, padding: 10,
        "text-background-opacity": 0, events: "no" } },
      { selector: "node.bundle", style: { shape: "tag", "border-width": 2, "border-color": "#344054", "border-style": "dashed" } },
      { selector: "node.focus", style: { "border-color": "#111111", "border-width": 3 } },
      { selector: "edge", style: { width: 1, "curve-style": "straight", opacity: 1,
        "target-arrow-shape": "none", "arrow-scale": 0.9 } },
      { selector: "edge.haystack", style: { "curve-style": "haystack" } },
      ...edgeStyles,
      { selector: "edge.path", style: { width: 5, "underlay-color": "#ffd166", "underlay-opacity": 0.9, "underlay-padding": 3,
        label: "data(label)", "font-size": 12, "min-zoomed-font-size": 0, "text-rotation": "autorotate",
        "text-background-color": "#ffffff", "text-background-opacity": 0.95 } },
      { selector: "edge.directed", style: { "target-arrow-shape": "triangle" } },
      { selector: "edge.contradicts", style: { "target-arrow-shape": "tee", "source-arrow-shape": "tee" } },
      { selector: "edge.supersedes", style: { "target-arrow-shape": "triangle-backcurve" } },
      { selector: "edge.many", style: { width: "data(width)" } },
      { selector: "node:selected", style: { "border-width": 4, "border-color": "#111111", label: "data(label)" } },
      { selector: "edge:selected", style: { opacity: 1, "underlay-color": "#ffd166", "underlay-opacity": 0.8,
        "underlay-padding": 4, label: "data(label)", "font-size": 10, "text-rotation": "autorotate",
        "text-background-color": "#ffffff", "text-background-opacity": 0.9 } },
      { selector: ".faded", style: { opacity: 0.15 } },
    ],
  });

  // --- small helpers ------------------------------------------------------------------------------------------
  function svg(tag, attrs) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    Object.entries(attrs).forEach(([k, v]) => el.setAttribute(k, v));
    return el;
  }

  function nodeSwatch(type) {
    const [colour, shape] = nodeStyle(type);
    const box = svg("svg", { width: 14, height: 14, viewBox: "0 0 14 14", "aria-hidden": "true", class: "glyph" });
    let mark;
    if (shape === "ellipse") mark = svg("circle", { cx: 7, cy: 7, r: 6 });
    else if (shape === "round-rectangle") mark = svg("rect", { x: 1, y: 2, width: 12, height: 10, rx: 3 });
    else if (shape === "diamond") mark = svg("polygon", { points: "7,0 14,7 7,14 0,7" });
    else mark = svg("polygon", { points: "3.5,1 10.5,1 14,7 10.5,13 3.5,13 0,7" });
    mark.setAttribute("fill", colour);
    box.appendChild(mark);
    return box;
  }

  function edgeSample(name) {
    const style = EDGE_STYLE[name] || EDGE_STYLE.structural;
    const box = svg("svg", { width: 28, height: 10, viewBox: "0 0 28 10", "aria-hidden": "true", class: "glyph" });
    const attrs = { x1: 1, y1: 5, x2: 27, y2: 5, stroke: style.colour, "stroke-width": Math.min(style.width, 3) };
    if (style.line === "dashed") attrs["stroke-dasharray"] = "6 3";
    if (style.line === "dotted") attrs["stroke-dasharray"] = "2 2";
    box.appendChild(svg("line", attrs));
    if (style.line === "double") box.appendChild(svg("line", { ...attrs, y1: 8, y2: 8, "stroke-width": 1.5 }));
    return box;
  }

  function text(tag, value, className) {
    const el = document.createElement(tag);
    el.textContent = value; // textContent: labels come from users and must never be parsed as HTML
    if (className) el.className = className;
    return el;
  }

  function seeded(seed) { // mulberry32: the same view lands the same way on every load
    let a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function withSeededRandom(fn) {
    const original = Math.random;
    Math.random = seeded(SEED);
    try { return fn(); } finally { Math.random = original; }
  }

  // --- URL state ----------------------------------------------------------------------------------------------
  function params() { return new URLSearchParams(window.location.search); }

  function urlWith(changes) {
    const p = params();
    Object.entries(changes).forEach(([key, value]) => {
      p.delete(key);
      (Array.isArray(value) ? value : [value]).forEach((v) => { if (v !== null && v !== undefined && v !== "") p.append(key, v); });
    });
    const query = p.toString();
    return window.location.pathname + (query ? "?" + query : "");
  }

  function setParams(changes) { history.replaceState(history.state, "", urlWith(changes)); }
  function pushParams(changes) { history.pushState({ explorer: true }, "", urlWith(changes)); }

  function filtersFromForm() {
    const data = new FormData(form);
    return {
      graph_et: data.getAll("graph_et"), graph_nt: data.getAll("graph_nt"),
      graph_mw: data.get("graph_mw") || "", graph_mc: data.get("graph_mc") || "",
      graph_ev: data.get("graph_ev") ? "1" : "", graph_limit: data.get("graph_limit") || "",
    };
  }

  function formFromUrl() {
    const p = params();
    const listOf = (key) => p.getAll(key).flatMap((v) => v.split(",")).filter(Boolean);
    form.querySelectorAll("input[name=graph_et]").forEach((el) => { el.checked = listOf("graph_et").includes(el.value); });
    form.querySelectorAll("input[name=graph_nt]").forEach((el) => { el.checked = listOf("graph_nt").includes(el.value); });
    form.elements.graph_mw.value = p.get("graph_mw") || "";
    form.elements.graph_mc.value = p.get("graph_mc") || "";
    form.elements.graph_ev.checked = p.get("graph_ev") === "1";
    form.elements.graph_limit.value = p.get("graph_limit") || "";
  }

  function dataQuery(extra) {
    const q = new URLSearchParams();
    const p = params();
    FILTER_KEYS.forEach((key) => p.getAll(key).forEach((v) => q.append(key, v)));
    if (p.get("graph_limit")) q.set("limit", p.get("graph_limit"));
    else if (window.matchMedia("(max-width: 600px)").matches) q.set("limit", String(MOBILE_NODES)); // a phone shows fewer
    Object.entries(extra || {}).forEach(([k, v]) => q.set(k, v));
    return config.dataUrl + "?" + q.toString();
  }

  // An expired session answers 401 with the sign-in URL: go there instead of showing an error.
  async function getJson(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    let payload = null;
    try { payload = await response.json(); } catch (error) { payload = null; }
    if (response.status === 401) {
      const login = payload && payload.error && payload.error.details && payload.error.details.loginUrl;
      window.location.assign(login || "/accounts/login/?next=" + encodeURIComponent(location.pathname + location.search));
      throw new Error("Your session has ended; taking you to sign-in.");
    }
    if (!response.ok || payload === null) {
      const message = payload && payload.error ? payload.error.message : "the server answered " + response.status;
      throw new Error(message);
    }
    return payload;
  }

  // --- data → elements ----------------------------------------------------------------------------------------
  function nodeElement(n) {
    const held = (n.memories || 0);
    const raw = n.type === "memory" ? 14 : Math.min(46, 16 + 4 * Math.log2(1 + held + (n.degree || 0) / 4));
    const size = SIZES.reduce((best, s) => (Math.abs(s - raw) < Math.abs(best - raw) ? s : best), SIZES[0]);
    let label = n.label || n.key;
    if (n.type === "memory" && label.length > 48) label = label.slice(0, 46) + "…";
    if (n.type !== "memory" && held) label += " · " + held;
    const typeClass = NODE_STYLE[n.type] ? "t-" + n.type : "";
    const classes = [typeClass, "s" + size, n.superseded ? "superseded" : "", n.contradicted ? "contradicted" : "",
      n.state === "outdated" ? "outdated" : n.state === "current" ? "current" : ""]
      .filter(Boolean).join(" ");
    return { group: "nodes", classes, data: {
      id: "n" + n.id, dbId: n.id, type: n.type, key: n.key, label, fullLabel: n.label || n.key,
      size, memories: held, hidden: n.hidden || 0, degree: n.degree || 0, memoryType: n.memoryType || "",
      state: n.state || "", fs: HUB_LABEL_PX } };
  }

  // Two nodes of one name ("api" the repo and "api" the project) say which kind each is, on the canvas.
  function nameKinds() {
    const byName = new Map();
    realNodes().forEach((n) => {
      const data = n.data();
      if (data.type === "memory" || data.type === "bundle" || data.group) return;
      const name = data.fullLabel.trim().toLowerCase();
      if (!byName.has(name)) byName.set(name, []);
      byName.get(name).push(n);
    });
    cy.batch(() => byName.forEach((same) => {
      if (new Set(same.map((n) => n.data("type"))).size < 2) return;
      same.forEach((n) => {
        if (n.data("kindShown")) return;
        n.data({ label: n.data("fullLabel") + " (" + n.data("type") + ")" + (n.data("memories") ? " · " + n.data("memories") : ""), kindShown: true });
      });
    }));
  }

  // Every node but a hub view's group boxes (a selector filter over thousands of nodes costs; most views have
  // no boxes at all).
  let hasGroups = false;
  const realNodes = () => (hasGroups ? cy.nodes().not(".group") : cy.nodes());

  // Edges of one pair of nodes become one drawn edge: its classes come from the most telling type it carries
  // (contradicts first), its label lists every type with its count.
  function pairElements(edges, big) {
    const pairs = new Map();
    edges.forEach((e) => {
      const a = Math.min(e.source, e.target), b = Math.max(e.source, e.target);
      const key = a + "-" + b;
      let pair = pairs.get(key);
      if (!pair) { pair = { key, a, b, types: new Map(), best: e, count: 0, edgeIds: [], directions: new Set() }; pairs.set(key, pair); }
      const seen = pair.types.get(e.type) || 0;
      pair.types.set(e.type, seen + e.count);
      pair.count += e.count;
      pair.directions.add(e.type + ":" + (e.source === a ? ">" : "<"));
      if (e.both) pair.directions.add(e.type + ":" + (e.source === a ? "<" : ">"));
      if (e.edgeId) pair.edgeIds.push(e.edgeId);
      if (CLASS_ORDER.indexOf(e.class) < CLASS_ORDER.indexOf(pair.best.class)) pair.best = e;
    });
    return Array.from(pairs.values()).map((pair) => {
      const best = pair.best;
      const both = pair.directions.has(best.type + ":>") && pair.directions.has(best.type + ":<");
      const directed = !both && ["relationship", "fact", "supersedes"].includes(best.class);
      const label = Array.from(pair.types.entries()).map(([t, c]) => (c > 1 ? t + " ×" + c : t)).join(", ");
      const classes = [best.class, directed ? "directed" : "", pair.count > 1 ? "many" : "",
        big && (best.class === "structural" || best.class === "similarity") ? "haystack" : ""].filter(Boolean).join(" ");
      return { group: "edges", classes, data: {
        id: "p" + pair.key, source: "n" + best.source, target: "n" + best.target, a: pair.a, b: pair.b,
        label, count: pair.count, edgeIds: pair.edgeIds, edgeClass: best.class,
        width: Math.min(6, 1 + Math.log2(pair.count)) } };
    });
  }

  // --- layout -------------------------------------------------------------------------------------------------
  // The constellation: hubs (repos, topics, categories, users, entities) on a spiral by how much hangs off
  // them, each memory beside the node it says the most about (the one of its neighbours with the fewest
  // memories on screen), memories reached only through other memories beside those. Deterministic, O(n).
  function constellation(payload) {
    const GOLDEN = Math.PI * (3 - Math.sqrt(5));
    const byId = new Map(payload.nodes.map((n) => [n.id, n]));
    const adjacency = new Map();
    payload.edges.forEach((e) => {
      if (!adjacency.has(e.source)) adjacency.set(e.source, []);
      if (!adjacency.has(e.target)) adjacency.set(e.target, []);
      adjacency.get(e.source).push(e.target);
      adjacency.get(e.target).push(e.source);
    });
    const memoryLinks = new Map(); // hub → memories linked on screen
    payload.nodes.forEach((n) => {
      if (n.type !== "memory") return;
      (adjacency.get(n.id) || []).forEach((other) => {
        const o = byId.get(other);
        if (o && o.type !== "memory") memoryLinks.set(other, (memoryLinks.get(other) || 0) + 1);
      });
    });
    const anchor = new Map();
    const queue = [];
    payload.nodes.forEach((n) => {
      if (n.type !== "memory") return;
      let best = null;
      (adjacency.get(n.id) || []).forEach((other) => {
        const o = byId.get(other);
        if (!o || o.type === "memory") return;
        const size = memoryLinks.get(other) || 0;
        if (best === null || size < best[0] || (size === best[0] && other < best[1])) best = [size, other];
      });
      if (best) { anchor.set(n.id, best[1]); queue.push(n.id); }
    });
    for (let i = 0; i < queue.length; i++) { // memories reached only through memories: beside them
      const hub = anchor.get(queue[i]);
      (adjacency.get(queue[i]) || []).forEach((other) => {
        const o = byId.get(other);
        if (o && o.type === "memory" && !anchor.has(other)) { anchor.set(other, hub); queue.push(other); }
      });
    }
    const members = new Map();
    payload.nodes.forEach((n) => {
      if (n.type === "memory") {
        const hub = anchor.has(n.id) ? anchor.get(n.id) : n.id; // an unanchored memory is its own centre
        if (!members.has(hub)) members.set(hub, []);
        if (hub !== n.id) members.get(hub).push(n.id);
      } else if (!members.has(n.id)) {
        members.set(n.id, []);
      }
    });
    const centres = Array.from(members.keys()).sort((x, y) =>
      (members.get(y).length - members.get(x).length) || ((byId.get(y).degree || 0) - (byId.get(x).degree || 0)) || (x - y));
    const positions = {};
    const STEP = 16;
    let area = 0;
    centres.forEach((centre, i) => {
      const radius = 30 + STEP * Math.sqrt(members.get(centre).length + 1);
      const distance = Math.sqrt(area / Math.PI) + (i ? radius : 0);
      area += Math.PI * (radius + 20) * (radius + 20);
      const angle = i * GOLDEN;
      const cx = distance * Math.cos(angle), cy0 = distance * Math.sin(angle);
      positions["n" + centre] = { x: cx, y: cy0 };
      members.get(centre).forEach((memory, k) => {
        const r = 26 + STEP * Math.sqrt(k);
        positions["n" + memory] = { x: cx + r * Math.cos(k * GOLDEN), y: cy0 + r * Math.sin(k * GOLDEN) };
      });
    });
    return positions;
  }

  // A hub's 1-hop view: the hub on top, everything around it in labelled boxes — its memories by type (rules
  // first), then what they are about by kind (topics, categories, people…) — each box most connected first.
  const KIND_ORDER = ["repo", "topic", "category", "user", "person", "project", "tool", "concept", "memory_type"];
  function hubGroups(payload) {
    const focusId = payload.focus.id;
    const degree = new Map();
    payload.edges.forEach((e) => {
      degree.set(e.source, (degree.get(e.source) || 0) + 1);
      degree.set(e.target, (degree.get(e.target) || 0) + 1);
    });
    const boxes = new Map();
    payload.nodes.forEach((n) => {
      if (n.id === focusId) return;
      const key = n.type === "memory" ? "m:" + (n.memoryType || "memory") : "k:" + n.type;
      if (!boxes.has(key)) boxes.set(key, []);
      boxes.get(key).push(n);
    });
    const rank = (key) => {
      const [family, name] = key.split(":");
      if (family === "m") return TYPE_ORDER.indexOf(name) < 0 ? TYPE_ORDER.length : TYPE_ORDER.indexOf(name);
      return 10 + (KIND_ORDER.indexOf(name) < 0 ? KIND_ORDER.length : KIND_ORDER.indexOf(name));
    };
    const keys = Array.from(boxes.keys()).sort((x, y) => rank(x) - rank(y) || x.localeCompare(y));
    const score = (n) => -((degree.get(n.id) || 0) + (n.memories || 0));
    const positions = {};
    const groups = [];
    const CELL_W = 120, CELL_H = 52, GAP = 70, ROW_MAX = 1500;
    let x = 0, y = 120, rowHeight = 0, widest = 0;
    const placed = [];
    keys.forEach((key) => {
      const members = boxes.get(key).sort((a, b) => score(a) - score(b) || (a.label || "").localeCompare(b.label || ""));
      const columns = Math.max(1, Math.min(8, Math.ceil(Math.sqrt(members.length * 1.5))));
      const width = columns * CELL_W, height = Math.ceil(members.length / columns) * CELL_H;
      if (x > 0 && x + width > ROW_MAX) { x = 0; y += rowHeight + GAP; rowHeight = 0; }
      members.forEach((n, i) => {
        positions["n" + n.id] = { x: x + (i % columns) * CELL_W, y: y + Math.floor(i / columns) * CELL_H };
      });
      const [family, name] = key.split(":");
      const plural = name === "memory" ? "memories" : name === "category" ? "categories" : name + "s";
      const title = (members.length === 1 ? name : plural).replace("_", " ");
      groups.push({ group: "nodes", classes: "group", data: { id: "g-" + key.replace(":", "-"), group: true,
        type: "group", label: title + " · " + members.length, fullLabel: title, fs: 16, memories: 0, degree: 0,
        size: 0, family }, members: members.map((n) => "n" + n.id) });
      placed.push([x, width]);
      x += width + GAP;
      widest = Math.max(widest, x);
      rowHeight = Math.max(rowHeight, height);
    });
    positions["n" + focusId] = { x: Math.max(widest - GAP - CELL_W, 0) / 2, y: 0 };
    return { positions, groups };
  }

  function layoutOptions(payload) {
    const count = realNodes().length;
    if (payload.focus && payload.focus.type !== "memory" && payload.positions) {
      return { name: "preset", positions: (n) => payload.positions[n.id()], fit: false, animate: false };
    }
    if (payload.focus) {
      // A node's 1-hop view: the node in the middle, what its memories are about around it, its memories
      // outside. Concentric is deterministic and instant.
      const focusId = "n" + payload.focus.id;
      return { name: "concentric", animate: false, minNodeSpacing: count > 60 ? 16 : 44, spacingFactor: count > 60 ? 1.05 : 1.3,
        concentric: (n) => (n.id() === focusId ? 3 : n.data("type") === "memory" ? 1 : 2), levelWidth: () => 1,
        sort: (x, y) => (x.data("type") + x.data("fullLabel")).localeCompare(y.data("type") + y.data("fullLabel")) };
    }
    return { name: "fcose", quality: count <= FORCE_QUALITY_MAX ? "default" : "draft", randomize: true,
      animate: false, fit: false, nodeDimensionsIncludeLabels: false, packComponents: true, tile: true,
      nodeRepulsion: () => 12000, idealEdgeLength: (e) => (e.data("edgeClass") === "structural" ? 80 : 55),
      edgeElasticity: () => 0.45, numIter: count <= FORCE_QUALITY_MAX ? 2500 : 1200, samplingType: true,
      sampleSize: 25, nodeSeparation: 80, initialEnergyOnIncremental: 0.3 };
  }

  function runLayout(payload) {
    if (!payload.focus && payload.nodes.length > FORCE_MAX) return; // placed by the constellation when added
    if (payload.positions) return; // a hub's groups: placed when added
    const options = layoutOptions(payload);
    withSeededRandom(() => cy.layout(options).run()); // synchronous with animate: false
  }

  // --- an overview's topics: the busiest stay, the rest fold into a bundle beside their repo ---------------
  let bundles = new Map(); // bundle id → { nodes, edges } folded into it

  function foldTopics(payload) {
    bundles = new Map();
    const topics = payload.nodes.filter((n) => n.type === "topic");
    if (payload.focus || topics.length <= TOPICS_KEPT + 2) return payload;
    const byId = new Map(payload.nodes.map((n) => [n.id, n]));
    const kept = new Set(topics.slice().sort((x, y) => (y.degree || 0) - (x.degree || 0) || (y.memories || 0) - (x.memories || 0))
      .slice(0, TOPICS_KEPT).map((n) => n.id));
    // Each folded topic goes to the repo it shares most with on screen (or to "other topics").
    const home = new Map();
    payload.edges.forEach((e) => {
      [[e.source, e.target], [e.target, e.source]].forEach(([topic, other]) => {
        const t = byId.get(topic), o = byId.get(other);
        if (!t || !o || t.type !== "topic" || kept.has(topic) || o.type !== "repo") return;
        const best = home.get(topic);
        if (!best || e.count > best[1] || (e.count === best[1] && other < best[0])) home.set(topic, [other, e.count]);
      });
    });
    const folded = new Map(); // topic id → bundle db id (negative: never a real node id)
    const bundleNodes = new Map();
    topics.forEach((t) => {
      if (kept.has(t.id)) return;
      const repo = home.has(t.id) ? home.get(t.id)[0] : 0;
      const bundleId = -1 - repo;
      folded.set(t.id, bundleId);
      if (!bundleNodes.has(bundleId)) {
        const owner = byId.get(repo);
        bundleNodes.set(bundleId, { id: bundleId, type: "bundle", key: "bundle:" + repo, repo,
          label: (owner ? owner.label + ": " : "other ") + "topics", memories: 0, degree: 0, topics: [] });
        bundles.set("n" + bundleId, { nodes: [], edges: [] });
      }
      bundleNodes.get(bundleId).topics.push(t);
      bundles.get("n" + bundleId).nodes.push(t);
    });
    const edges = [];
    const seen = new Set();
    payload.edges.forEach((e) => {
      const s = folded.get(e.source), t = folded.get(e.target);
      if (s === undefined && t === undefined) { edges.push(e); return; }
      bundles.get("n" + (s !== undefined ? s : t)).edges.push(e);
      if (s !== undefined && t !== undefined) return;
      const source = s !== undefined ? s : e.source, target = t !== undefined ? t : e.target;
      const key = source + ">" + target + ":" + e.type;
      if (seen.has(key)) return;
      seen.add(key);
      edges.push({ ...e, id: "b" + key, edgeId: null, source, target, count: 1 });
    });
    bundleNodes.forEach((b) => {
      b.label += " · " + b.topics.length + " more (click to open)";
      b.degree = b.topics.length;
      const owner = byId.get(b.repo);
      if (owner) edges.push({ id: "bl" + b.id, edgeId: null, source: b.id, target: owner.id, type: "topics_of",
        class: "structural", count: 1, weight: 1, confidence: 1, evidence: false });
    });
    const nodes = payload.nodes.filter((n) => !folded.has(n.id)).concat(Array.from(bundleNodes.values()));
    return { ...payload, nodes, edges };
  }

  function openBundle(bundle) {
    const folded = bundles.get(bundle.id());
    if (!folded) return;
    bundles.delete(bundle.id());
    const centre = bundle.position();
    const fresh = folded.nodes.map(nodeElement);
    const radius = 60 + 8 * fresh.length;
    fresh.forEach((el, i) => {
      const angle = (2 * Math.PI * i) / fresh.length;
      el.position = { x: centre.x + radius * Math.cos(angle), y: centre.y + radius * Math.sin(angle) };
    });
    cy.batch(() => {
      bundle.remove();
      cy.add(fresh);
      const onScreen = (id) => cy.getElementById("n" + id).nonempty();
      cy.add(pairElements(folded.edges.filter((e) => onScreen(e.source) && onScreen(e.target)), false)
        .filter((e) => cy.getElementById(e.data.id).empty()));
    });
    afterChange();
    cy.animate({ fit: { eles: cy.collection(fresh.map((el) => cy.getElementById(el.data.id))), padding: 60 } }, { duration: 250 });
  }

  // --- labels: sized by zoom (font in graph units), hidden when they would overlap -----------------------------
  // The hubs on screen, found once per view (a class selector over thousands of nodes on every zoom costs).
  let hubCache = null;
  function hubNodes() {
    if (hubCache === null || hubCache.some((n) => n.removed())) hubCache = cy.nodes(".hub").toArray();
    return hubCache;
  }

  function markHubs() {
    const hubs = realNodes().filter((n) => n.data("type") !== "memory")
      .sort((x, y) => (y.data("memories") + y.data("degree")) - (x.data("memories") + x.data("degree"))).slice(0, HUBS_LABELLED);
    cy.batch(() => { cy.nodes(".hub").removeClass("hub"); hubs.addClass("hub"); });
    hubCache = null;
  }

  function cullLabels() {
    const zoom = cy.zoom();
    const font = LABEL_FONT * zoom; // on screen
    // Hubs keep 12 px on screen at any zoom: their font in graph units grows as the view zooms out.
    const hubUnits = Math.max(LABEL_FONT, HUB_LABEL_PX / zoom);
    const groupUnits = Math.max(16, 14 / zoom);
    cy.batch(() => {
      hubNodes().forEach((n) => { if (n.data("fs") !== hubUnits) n.data("fs", hubUnits); });
      if (hasGroups) cy.nodes(".group").forEach((n) => { if (n.data("fs") !== groupUnits) n.data("fs", groupUnits); });
    });
    const ext = cy.extent();
    const cell = 48;
    const grid = new Map();
    const show = new Set();
    const selected = cy.$("node:selected");
    const hubs = hubNodes();
    const order = selected.toArray().concat(hubs, font >= MIN_LABEL_PX ? labelOrder : []);
    for (const node of order) {
      if (node.removed() || show.has(node.id())) continue;
      const p = node.position();
      if (p.x < ext.x1 || p.x > ext.x2 || p.y < ext.y1 || p.y > ext.y2) continue;
      const px = node.hasClass("hub") ? HUB_LABEL_PX : font;
      const r = node.renderedPosition();
      const chars = Math.min(node.data("label").length, 40);
      const w = Math.min(chars * px * 0.56, 220 * zoom) + 4, h = px * 1.35;
      const top = r.y + node.data("size") * zoom / 2;
      const box = [r.x - w / 2, top, r.x + w / 2, top + h];
      let clash = false;
      const keys = [];
      for (let gx = Math.floor(box[0] / cell); gx <= Math.floor(box[2] / cell) && !clash; gx++) {
        for (let gy = Math.floor(box[1] / cell); gy <= Math.floor(box[3] / cell); gy++) {
          const key = gx + ":" + gy;
          keys.push(key);
          const placed = grid.get(key);
          if (placed && placed.some((o) => !(o[2] < box[0] || o[0] > box[2] || o[3] < box[1] || o[1] > box[3]))) { clash = true; break; }
        }
      }
      if (clash && !node.selected()) continue;
      keys.forEach((key) => { if (!grid.has(key)) grid.set(key, []); grid.get(key).push(box); });
      show.add(node.id());
    }
    cy.batch(() => {
      realNodes().forEach((node) => {
        const hide = !show.has(node.id()) && !node.selected();
        if (hide !== node.hasClass("nolabel")) node.toggleClass("nolabel", hide);
      });
    });
  }

  // Label priority: hubs, then a hub view's rules and decisions, then the best connected.
  function orderLabels() {
    // Weights read once per node: a sort that read them per comparison was a fifth of a 2,000-node frame.
    const weighted = realNodes().map((n) => {
      const data = n.data();
      const t = TYPE_ORDER.indexOf(data.memoryType);
      return [data.memories + data.degree + (data.type === "memory" && t >= 0 ? (TYPE_ORDER.length - t) * 2 : 0), n];
    });
    weighted.sort((x, y) => y[0] - x[0]);
    labelOrder = weighted.map((pair) => pair[1]);
  }

  // After nodes come or go: kinds on same-name nodes, hubs, labels, legend and lists.
  function afterChange() {
    nameKinds();
    markHubs();
    orderLabels();
    buildLegend();
    refreshNodeList();
    cullLabels();
    if (lastPayload) describe(lastPayload);
  }

  let cullTimer = null;
  cy.on("viewport", () => { clearTimeout(cullTimer); cullTimer = setTimeout(cullLabels, 120); });

  // --- loading a view -----------------------------------------------------------------------------------------
  function describe(payload) {
    const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");
    let status = plural(realNodes().length, "node") + ", " + plural(cy.edges().length, "edge");
    if (bundles.size) status += "; " + Array.from(bundles.values()).reduce((n, b) => n + b.nodes.length, 0) + " topics folded into their repo (click a bundle to open it)";
    if (payload.focus) status = (payload.focus.label || payload.focus.key) + " — " + status;
    if (payload.more) status += "; " + payload.more.count + " more memories (Show more in Details)";
    if (payload.truncated) status += " (more exist: narrow the filters or open a node)";
    statusEl.textContent = status;
  }

  // Fit into the part of the canvas the open legend leaves free, and never blow a few nodes up.
  function fit() {
    const legend = $("graph-legend");
    const covered = legend.open ? legend.offsetHeight + 8 : 0;
    const pad = 24, width = canvas.clientWidth, height = canvas.clientHeight - covered;
    // From the node positions: Cytoscape's own bounding box measures every label (most of a second at 2,000).
    let x1 = Infinity, y1 = Infinity, x2 = -Infinity, y2 = -Infinity;
    realNodes().forEach((n) => {
      const p = n.position(), r = n.data("size") / 2;
      x1 = Math.min(x1, p.x - r); y1 = Math.min(y1, p.y - r); x2 = Math.max(x2, p.x + r); y2 = Math.max(y2, p.y + r + 14);
    });
    if (!isFinite(x1)) return;
    const bb = { x1, y1, w: Math.max(x2 - x1, 1), h: Math.max(y2 - y1, 1) };
    const zoom = Math.min(1.4, Math.max(cy.minZoom(), Math.min((width - 2 * pad) / Math.max(bb.w, 1), (height - 2 * pad) / Math.max(bb.h, 1))));
    cy.viewport({ zoom, pan: { x: width / 2 - zoom * (bb.x1 + bb.w / 2), y: height / 2 - zoom * (bb.y1 + bb.h / 2) } });
  }

  function showError(message) {
    statusEl.textContent = "Could not load the graph: " + message;
    statusEl.classList.add("error-text");
    canvas.dataset.ready = "error";
  }

  async function load() {
    const token = ++loadToken;
    canvas.dataset.ready = "0";
    statusEl.classList.remove("error-text");
    statusEl.textContent = "Loading…";
    clearSelection();
    $("path-panel").replaceChildren();
    const p = params();
    if (p.get("graph_path")) { loadPath(p.get("graph_path"), token); return; }
    const focused = p.get("graph_node_type") && p.get("graph_node_key");
    let payload;
    try {
      performance.mark("graph:fetch");
      payload = await getJson(dataQuery(focused ? { graph_node_type: p.get("graph_node_type"), graph_node_key: p.get("graph_node_key") } : {}));
    } catch (error) {
      if (token === loadToken) showError(error.message);
      return;
    }
    if (token !== loadToken) return; // a newer view was asked for meanwhile
    performance.mark("graph:fetched");
    payload = foldTopics(payload);
    lastPayload = payload;
    const big = payload.nodes.length > BIG;
    const nodes = payload.nodes.map(nodeElement);
    let groups = [];
    if (!payload.focus && payload.nodes.length > FORCE_MAX) {
      const positions = constellation(payload);
      nodes.forEach((el) => { el.position = positions[el.data.id] || { x: 0, y: 0 }; });
    } else if (payload.focus && payload.focus.type !== "memory") {
      const laid = hubGroups(payload);
      payload.positions = laid.positions;
      groups = laid.groups;
      const parentOf = new Map();
      groups.forEach((g) => g.members.forEach((m) => parentOf.set(m, g.data.id)));
      nodes.forEach((el) => {
        el.position = laid.positions[el.data.id] || { x: 0, y: 0 };
        if (parentOf.has(el.data.id)) el.data.parent = parentOf.get(el.data.id);
      });
      groups.forEach((g) => { delete g.members; });
    }
    // Hubs carry a label at every zoom: marked before they are added (a class change later restyles them).
    const hubOrder = nodes.filter((el) => el.data.type !== "memory")
      .sort((x, y) => (y.data.memories + y.data.degree) - (x.data.memories + x.data.degree)).slice(0, HUBS_LABELLED);
    hubOrder.forEach((el) => { el.classes += " hub"; });
    if (big) {
      // Measuring thousands of labels is most of a first frame: only the hubs carry one at first.
      const order = nodes.map((el, i) => [el.data.memories + el.data.degree, i]).sort((x, y) => y[0] - x[0]);
      order.slice(FIRST_LABELS).forEach(([, i]) => { if (!/\bhub\b/.test(nodes[i].classes)) nodes[i].classes = (nodes[i].classes + " nolabel").trim(); });
      nodes.forEach((el) => { el.classes = (el.classes + " plain").trim(); });
    }
    const edges = pairElements(payload.edges, big);
    // A big view draws its nodes and the edges that say the most first; the many structural and similarity
    // lines follow a frame later, so the graph is on screen before they are.
    const bulk = (e) => e.data.edgeClass === "structural" || e.data.edgeClass === "similarity";
    const later = big ? edges.filter(bulk) : [];
    const now = big ? edges.filter((e) => !bulk(e)) : edges;
    hasGroups = groups.length > 0;
    hubCache = null;
    cy.startBatch();
    cy.elements().remove();
    cy.add(groups.concat(nodes, now));
    if (payload.focus) cy.getElementById("n" + payload.focus.id).addClass("focus");
    cy.endBatch();
    performance.mark("graph:added");
    runLayout(payload);
    performance.mark("graph:laidout");
    nameKinds();
    orderLabels();
    buildLegend(); // before the fit: the fit leaves the room the legend takes
    fit();
    performance.mark("graph:fitted");
    cullLabels();
    performance.mark("graph:culled");
    describe(payload);
    refreshNodeList();
    performance.mark("graph:panels");
    setupMinimap(payload);
    // Two frames: the first draws, the second proves it was drawn (what a person sees).
    requestAnimationFrame(() => requestAnimationFrame(() => {
      if (token !== loadToken) return;
      performance.mark("graph:drawn");
      if (later.length) {
        cy.add(later);
        describe(payload);
        buildLegend();
      }
      requestAnimationFrame(() => requestAnimationFrame(() => {
        if (token !== loadToken) return;
        performance.mark("graph:complete");
        if (navigator) cy.forceRender(); // the thumbnail follows renders: one more, of the finished view
        canvas.dataset.readyMs = String(Math.round(performance.now()));
        canvas.dataset.ready = "1";
        document.dispatchEvent(new CustomEvent("graph:ready"));
      }));
    }));
    restoreSelection(payload);
  }

  function restoreSelection(payload) {
    const p = params();
    const sel = p.get("graph_sel_type") && p.get("graph_sel_key")
      ? cy.nodes().filter((n) => n.data("type") === p.get("graph_sel_type") && n.data("key") === p.get("graph_sel_key"))
      : payload.focus ? cy.getElementById("n" + payload.focus.id) : cy.collection();
    // A node picked in the find box opens with its summary in view (on a phone: the Details drawer).
    if (sel.nonempty()) selectNode(sel[0], { quiet: !openAfterLoad });
    openAfterLoad = false;
    const edgeId = p.get("graph_edge_id");
    const pair = p.get("graph_pair");
    if (edgeId) {
      const drawn = cy.edges().filter((e) => e.data("edgeIds").includes(Number(edgeId)));
      selectPair(drawn.nonempty() ? drawn[0] : null, { edgeId });
    } else if (pair) {
      const drawn = cy.getElementById("p" + pair);
      if (drawn.nonempty()) selectPair(drawn);
    }
  }

  // --- expand: add a node's neighbours around it, keeping everything else where it is -------------------------
  async function expand(node, extra) {
    if (!node) return;
    statusEl.textContent = "Expanding " + node.data("fullLabel") + "…";
    let payload;
    try {
      payload = await getJson(dataQuery({ graph_node_type: node.data("type"), graph_node_key: node.data("key"), ...(extra || {}) }));
    } catch (error) {
      showError(error.message);
      return;
    }
    const freshNodes = payload.nodes.filter((n) => cy.getElementById("n" + n.id).empty()).map(nodeElement);
    const freshEdges = pairElements(payload.edges.filter((e) => cy.getElementById("n" + e.source).nonempty() || freshNodes.some((n) => n.data.dbId === e.source))
      .filter((e) => cy.getElementById("n" + e.target).nonempty() || freshNodes.some((n) => n.data.dbId === e.target)), false)
      .filter((e) => cy.getElementById(e.data.id).empty());
    // New nodes go on an arc around the expanded node, on the side facing away from the rest of the graph.
    const centre = node.position();
    const middle = realNodes().boundingBox();
    const away = Math.atan2(centre.y - (middle.y1 + middle.y2) / 2, centre.x - (middle.x1 + middle.x2) / 2);
    const radius = 90 + 6 * freshNodes.length;
    const spread = freshNodes.length > 12 ? 2 * Math.PI : Math.PI * 1.2;
    freshNodes.forEach((el, i) => {
      const angle = away - spread / 2 + spread * (i + 0.5) / Math.max(freshNodes.length, 1);
      el.position = { x: centre.x + radius * Math.cos(angle), y: centre.y + radius * Math.sin(angle) };
    });
    cy.batch(() => cy.add(freshNodes.concat(freshEdges)));
    cy.animate({ fit: { eles: node.closedNeighborhood(), padding: 40 } }, { duration: 250 });
    setTimeout(cullLabels, 300);
    const paging = extra && extra.graph_offset !== undefined;
    lastPayload = { ...payload, focus: lastPayload && lastPayload.focus, more: paging ? payload.more : lastPayload && lastPayload.more };
    afterChange();
    refreshEdgeList();
    const through = extra && extra.graph_et ? " through " + extra.graph_et : "";
    statusEl.textContent = "Expanded " + node.data("fullLabel") + through + ": " + freshNodes.length + " new node" + (freshNodes.length === 1 ? "" : "s") + ". " + statusEl.textContent;
    if (paging && payload.more) moreOffset = payload.more.offset;
  }

  let moreOffset = 0;

  // --- selection and panels -----------------------------------------------------------------------------------
  function option(value, label) {
    const el = document.createElement("option");
    el.value = value;
    el.textContent = label;
    return el;
  }

  function refreshNodeList() {
    const nodes = labelOrder.length ? labelOrder : realNodes().toArray();
    nodeSelect.replaceChildren(...nodes.slice(0, LIST_MAX).filter((n) => !n.removed()).map((n) => {
      const el = option(n.id(), n.data("fullLabel").slice(0, 200) + " (" + n.data("type") + (n.data("memories") ? ", " + n.data("memories") + " memories" : "") + (n.data("state") === "outdated" ? ", likely outdated" : n.data("state") === "current" ? ", current" : "") + ")");
      el.title = n.data("fullLabel");
      return el;
    }));
    if (selectedNode) nodeSelect.value = selectedNode.id();
  }

  function pairText(edge) {
    const a = cy.getElementById("n" + edge.data("a")), b = cy.getElementById("n" + edge.data("b"));
    return a.data("fullLabel").slice(0, 40) + " — " + edge.data("label") + " — " + b.data("fullLabel").slice(0, 40);
  }

  function refreshEdgeList() {
    const edges = selectedNode ? selectedNode.connectedEdges() : cy.collection();
    edgeSelect.replaceChildren(...edges.map((e) => option(e.id(), pairText(e))));
    if (selectedPair) edgeSelect.value = selectedPair.id();
  }

  function panel(url, target) {
    return htmx.ajax("GET", url, { source: target, target, swap: "innerHTML" });
  }

  function loadNodePanel() {
    if (!selectedNode) return;
    const details = document.querySelector("#edge-details");
    const q = new URLSearchParams({ graph_node_type: selectedNode.data("type"), graph_node_key: selectedNode.data("key"),
      evidence: details ? details.dataset.evidence || "" : "" });
    panel(config.nodeUrl + "?" + q.toString(), "#node-panel");
  }

  function clearSelection() {
    selectedNode = null;
    selectedPair = null;
    expandButton.disabled = true;
    cy.elements().unselect();
    $("edge-panel").replaceChildren();
    $("node-panel").replaceChildren(text("p", "Click a node to see its memories; double-click (or Enter in the list) opens its 1-hop view.", "hint"));
    edgeSelect.replaceChildren();
  }

  function openDetails() {
    if (window.matchMedia("(max-width: 900px)").matches) toggleDrawer("details-drawer", true);
  }

  function selectNode(node, opts) {
    if (!node || node.empty()) return;
    selectedNode = node;
    selectedPair = null;
    cy.elements().unselect();
    node.select();
    node.removeClass("nolabel");
    expandButton.disabled = false;
    nodeSelect.value = node.id();
    setParams({ graph_sel_type: node.data("type"), graph_sel_key: node.data("key"), graph_edge_id: "", graph_pair: "" });
    $("edge-panel").replaceChildren();
    refreshEdgeList();
    loadNodePanel();
    if (!(opts && opts.quiet)) openDetails();
  }

  function selectPair(edge, opts) {
    const edgeId = opts && opts.edgeId;
    if (!edgeId && edge && (edge.data("a") < 0 || edge.data("b") < 0)) return; // a folded bundle's line
    if (edge) {
      selectedPair = edge;
      cy.edges().unselect();
      edge.select();
      edgeSelect.value = edge.id();
    }
    const url = edgeId
      ? config.edgeUrl + encodeURIComponent(edgeId) + "/"
      : config.pairUrl + "?" + new URLSearchParams({ a: edge.data("a"), b: edge.data("b") }).toString();
    setParams(edgeId ? { graph_edge_id: edgeId, graph_pair: "" } : { graph_pair: edge.data("a") + "-" + edge.data("b"), graph_edge_id: "" });
    panel(url, "#edge-panel").then(loadNodePanel);
    openDetails();
  }

  // A drill-down: a new entry in the browser's history, so Back returns to the view before it.
  function focusNode(type, key) {
    moreOffset = 0;
    pushParams({ graph_node_type: type, graph_node_key: key, graph_sel_type: "", graph_sel_key: "", graph_edge_id: "", graph_pair: "", graph_path: "" });
    load();
  }

  cy.on("tap", "node", (evt) => {
    if (evt.target.data("type") === "bundle") { openBundle(evt.target); return; }
    selectNode(evt.target);
  });
  cy.on("dbltap", "node", (evt) => {
    if (evt.target.data("type") === "bundle" || evt.target.data("group")) return;
    focusNode(evt.target.data("type"), evt.target.data("key"));
  });

  // --- full text on hover and on keyboard focus ----------------------------------------------------------------
  const tooltip = $("graph-tooltip");
  function showTooltip(node) {
    if (!node || node.empty() || node.data("group")) { tooltip.hidden = true; return; }
    const bits = [node.data("type")];
    if (node.data("memories")) bits.push(node.data("memories") + " memories");
    if (node.data("memoryType")) bits.push(node.data("memoryType"));
    if (node.data("state") === "outdated") bits.push("likely outdated: a newer memory says otherwise");
    if (node.data("state") === "current") bits.push("current side of a conflict");
    if (node.data("type") === "bundle") bits.push("click to show these topics");
    tooltip.replaceChildren(text("span", node.data("fullLabel")), text("small", bits.join(" · ")));
    const r = node.renderedPosition();
    tooltip.hidden = false;
    const left = Math.max(4, Math.min(r.x + 12, canvas.clientWidth - tooltip.offsetWidth - 4));
    const top = r.y + 14 + tooltip.offsetHeight > canvas.clientHeight ? r.y - tooltip.offsetHeight - 14 : r.y + 14;
    tooltip.style.left = left + "px"; // CSSOM from our own script: allowed by the CSP
    tooltip.style.top = Math.max(4, top) + "px";
  }
  cy.on("mouseover", "node", (evt) => showTooltip(evt.target));
  cy.on("mouseout", "node", () => { tooltip.hidden = true; });
  cy.on("viewport", () => { tooltip.hidden = true; });
  nodeSelect.addEventListener("focus", () => { if (selectedNode) showTooltip(selectedNode); });
  nodeSelect.addEventListener("blur", () => { tooltip.hidden = true; });
  cy.on("tap", "edge", (evt) => {
    const edge = evt.target;
    selectPair(edge);
  });
  cy.on("tap", (evt) => {
    if (evt.target === cy) { clearSelection(); setParams({ graph_sel_type: "", graph_sel_key: "", graph_edge_id: "", graph_pair: "" }); }
  });

  nodeSelect.addEventListener("change", () => {
    const picked = cy.getElementById(nodeSelect.value);
    if (picked.data("type") === "bundle") { openBundle(picked); return; }
    selectNode(picked, { quiet: true });
    showTooltip(cy.getElementById(nodeSelect.value));
  });
  nodeSelect.addEventListener("keydown", (evt) => {
    if (evt.key === "Enter" && nodeSelect.value) {
      evt.preventDefault();
      const node = cy.getElementById(nodeSelect.value);
      if (node.data("type") === "bundle") { openBundle(node); return; }
      focusNode(node.data("type"), node.data("key"));
    }
  });
  edgeSelect.addEventListener("change", () => selectPair(cy.getElementById(edgeSelect.value)));
  const expandType = $("expand-type");
  expandButton.addEventListener("click", () => expand(selectedNode, expandType.value ? { graph_et: expandType.value } : null));

  // Buttons inside the server-rendered panels (no inline handlers: delegated here).
  document.addEventListener("click", (evt) => {
    const target = evt.target.closest("[data-graph-open], [data-graph-more], [data-graph-expand]");
    if (!target) return;
    evt.preventDefault();
    if (target.dataset.graphOpen !== undefined) focusNode(target.dataset.nodeType, target.dataset.nodeKey);
    else if (target.dataset.graphExpand !== undefined) expand(selectedNode, expandType.value ? { graph_et: expandType.value } : null);
    else if (target.dataset.graphMore !== undefined && lastPayload && lastPayload.focus) {
      const focus = cy.getElementById("n" + lastPayload.focus.id);
      expand(focus, { graph_offset: String(moreOffset || (lastPayload.more ? lastPayload.more.offset : 0)) });
    }
  });

  window.addEventListener("popstate", () => { formFromUrl(); load(); });

  form.addEventListener("submit", (evt) => {
    evt.preventDefault();
    pushParams(filtersFromForm());
    toggleDrawer("filters-drawer", false);
    load();
  });
  $("graph-clear").addEventListener("click", () => {
    setTimeout(() => { pushParams({ graph_et: [], graph_nt: [], graph_mw: "", graph_mc: "", graph_ev: "", graph_limit: "" }); load(); }, 0);
  });
  $("graph-reset").addEventListener("click", () => {
    pushParams({ graph_node_type: "", graph_node_key: "", graph_sel_type: "", graph_sel_key: "", graph_edge_id: "", graph_pair: "", graph_path: "" });
    load();
  });

  // --- zoom, fit, minimap -------------------------------------------------------------------------------------
  function zoomBy(factor) {
    cy.zoom({ level: cy.zoom() * factor, renderedPosition: { x: canvas.clientWidth / 2, y: canvas.clientHeight / 2 } });
  }
  $("zoom-in").addEventListener("click", () => zoomBy(1.4));
  $("zoom-out").addEventListener("click", () => zoomBy(1 / 1.4));
  $("zoom-fit").addEventListener("click", () => { fit(); cullLabels(); });

  function setupMinimap(payload) {
    const box = $("graph-minimap");
    const wanted = !payload.focus && realNodes().length > 60 && typeof cy.navigator === "function"
      && window.matchMedia("(min-width: 901px)").matches;
    box.hidden = !wanted;
    if (!wanted || navigator) return;
    // After the first frame: the thumbnail is a second rendering of the whole graph.
    setTimeout(() => {
      if (!navigator) navigator = cy.navigator({ container: "#graph-minimap", viewLiveFramerate: 0, rerenderDelay: 1000, removeCustomContainer: false });
      // The thumbnail is drawn on the canvas's next render: a still graph has none, which left the box blank.
      cy.forceRender();
    }, 400);
  }

  // --- legend: exactly the node and edge types on screen ------------------------------------------------------
  function buildLegend() {
    const nodeCounts = new Map(), edgeCounts = new Map();
    realNodes().forEach((n) => nodeCounts.set(n.data("type"), (nodeCounts.get(n.data("type")) || 0) + 1));
    cy.edges().forEach((e) => {
      const cls = e.data("edgeClass");
      if (!edgeCounts.has(cls)) edgeCounts.set(cls, new Set());
      e.data("label").split(", ").forEach((t) => edgeCounts.get(cls).add(t.replace(/ ×\d+$/, "")));
    });
    const nodes = $("legend-nodes"), edges = $("legend-edges");
    nodes.replaceChildren(...Array.from(nodeCounts.entries()).sort((x, y) => y[1] - x[1]).map(([type, count]) => {
      const item = text("span", "", "legend-item");
      item.dataset.nodeType = type;
      item.append(nodeSwatch(type), document.createTextNode(" " + type + " " + count));
      return item;
    }));
    edges.replaceChildren(...CLASS_ORDER.filter((c) => edgeCounts.has(c)).map((cls) => {
      const item = text("span", "", "legend-item legend-edge");
      item.dataset.edgeClass = cls;
      item.title = Array.from(edgeCounts.get(cls)).join(", ");
      item.append(edgeSample(cls), document.createTextNode(" " + EDGE_STYLE[cls].label));
      return item;
    }));
  }

  // --- find: what does the agent know about X -----------------------------------------------------------------
  let findTimer = null;
  let findItems = [];

  function renderFind(items) {
    findItems = items;
    findResults.replaceChildren(...items.map((item, i) => {
      const li = document.createElement("li");
      li.setAttribute("role", "option");
      li.id = "find-option-" + i;
      li.dataset.index = String(i);
      if (item.kind === "memory") li.append(nodeSwatch("memory"), text("span", " " + item.label, "find-label"), text("small", " memory"));
      else li.append(nodeSwatch(item.type), text("span", " " + item.label, "find-label"), text("small", " " + item.type + (item.memories ? " · " + item.memories + " memories" : "") + (item.onScreen ? " · on screen" : "")));
      return li;
    }));
    if (!items.length && findInput.value.trim()) findResults.replaceChildren(text("li", "Nothing found for these words.", "hint"));
    findResults.hidden = !findInput.value.trim();
    findInput.setAttribute("aria-expanded", String(!findResults.hidden));
  }

  async function find(query) {
    const words = query.trim().toLowerCase();
    if (!words) { renderFind([]); return; }
    const local = realNodes().filter((n) => n.data("type") !== "memory" && n.data("type") !== "bundle" && n.data("fullLabel").toLowerCase().includes(words))
      .slice(0, 5).map((n) => ({ kind: "node", id: n.data("dbId"), type: n.data("type"), key: n.data("key"), label: n.data("fullLabel"), memories: n.data("memories"), onScreen: true }));
    renderFind(local);
    let found;
    try { found = await getJson(config.findUrl + "?" + new URLSearchParams({ q: query }).toString()); } catch (error) { return; }
    if (findInput.value !== query) return;
    const seen = new Set(local.map((i) => i.id));
    const nodes = found.nodes.filter((n) => !seen.has(n.id)).map((n) => ({ kind: "node", id: n.id, type: n.type, key: n.key, label: n.label, memories: n.memories }));
    const memories = found.memories.filter((m) => m.nodeId).map((m) => ({ kind: "memory", id: m.nodeId, type: "memory", key: m.key, label: m.content }));
    renderFind(local.concat(nodes, memories));
  }

  let openAfterLoad = false;
  function pick(index) {
    const item = findItems[index];
    if (!item) return;
    openAfterLoad = true;
    findResults.hidden = true;
    findInput.setAttribute("aria-expanded", "false");
    focusNode(item.type, item.key);
  }

  findInput.addEventListener("input", () => { clearTimeout(findTimer); findTimer = setTimeout(() => find(findInput.value), 200); });
  findInput.addEventListener("keydown", (evt) => {
    const options = Array.from(findResults.querySelectorAll("[role=option]"));
    const current = options.findIndex((o) => o.getAttribute("aria-selected") === "true");
    if (evt.key === "ArrowDown" || evt.key === "ArrowUp") {
      evt.preventDefault();
      const next = options.length ? (current + (evt.key === "ArrowDown" ? 1 : -1) + options.length) % options.length : -1;
      options.forEach((o, i) => o.setAttribute("aria-selected", String(i === next)));
      if (next >= 0) findInput.setAttribute("aria-activedescendant", options[next].id);
    } else if (evt.key === "Escape") {
      findResults.hidden = true;
    }
  });
  $("graph-find").addEventListener("submit", async (evt) => {
    evt.preventDefault();
    const options = Array.from(findResults.querySelectorAll("[role=option]"));
    const current = options.findIndex((o) => o.getAttribute("aria-selected") === "true");
    if (current >= 0) { pick(current); return; }
    clearTimeout(findTimer);
    await find(findInput.value);
    if (findItems.length) pick(0);
  });
  findResults.addEventListener("click", (evt) => {
    const li = evt.target.closest("[role=option]");
    if (li) pick(Number(li.dataset.index));
  });

  // --- how is A connected to B --------------------------------------------------------------------------------
  async function resolveNode(words) {
    const local = realNodes().filter((n) => n.data("type") !== "memory" && n.data("type") !== "bundle"
      && n.data("fullLabel").toLowerCase() === words.trim().toLowerCase());
    if (local.nonempty()) return { id: local[0].data("dbId"), label: local[0].data("fullLabel"), type: local[0].data("type") };
    const found = await getJson(config.findUrl + "?" + new URLSearchParams({ q: words }).toString());
    if (found.nodes.length) return { id: found.nodes[0].id, label: found.nodes[0].label, type: found.nodes[0].type };
    const memory = found.memories.find((m) => m.nodeId);
    return memory ? { id: memory.nodeId, label: memory.content, type: "memory" } : null;
  }

  $("path-form").addEventListener("submit", async (evt) => {
    evt.preventDefault();
    const a = $("path-a").value.trim(), b = $("path-b").value.trim();
    if (!a || !b) return;
    statusEl.textContent = "Looking for " + a + " and " + b + "…";
    let first, second;
    try { [first, second] = await Promise.all([resolveNode(a), resolveNode(b)]); } catch (error) { showError(error.message); return; }
    if (!first || !second) {
      statusEl.textContent = "Nothing found for " + (!first ? "“" + a + "”" : "“" + b + "”") + ": try other words.";
      return;
    }
    $("path-box").open = false;
    pushParams({ graph_path: first.id + "-" + second.id, graph_node_type: "", graph_node_key: "", graph_sel_type: "", graph_sel_key: "", graph_edge_id: "", graph_pair: "" });
    load();
  });

  // The paths drawn left to right, one row each (a node two paths share stays where the first put it), and
  // explained step by step in the panel.
  async function loadPath(spec, token) {
    const [a, b] = spec.split("-");
    let found;
    try {
      found = await getJson(config.pathUrl + "?" + new URLSearchParams({ a, b }).toString());
    } catch (error) {
      if (token === loadToken) showError(error.message);
      return;
    }
    if (token !== loadToken) return;
    lastPayload = { nodes: found.nodes, edges: [], focus: null, more: null, truncated: false };
    bundles = new Map();
    const byId = new Map(found.nodes.map((n) => [n.id, n]));
    const positions = {};
    const edges = [];
    found.paths.forEach((path, row) => {
      path.nodes.forEach((id, hop) => { if (!positions["n" + id]) positions["n" + id] = { x: hop * 240, y: row * 130 }; });
      path.steps.forEach((step) => {
        const id = "path-" + Math.min(step.source, step.target) + "-" + Math.max(step.source, step.target) + "-" + step.type;
        if (edges.some((e) => e.data.id === id)) return;
        edges.push({ group: "edges", classes: step.class + " path" + (["relationship", "fact", "supersedes"].includes(step.class) ? " directed" : ""),
          data: { id, source: "n" + step.source, target: "n" + step.target, label: step.type.replace(/_/g, " "),
            a: Math.min(step.source, step.target), b: Math.max(step.source, step.target), edgeIds: step.edgeId ? [step.edgeId] : [],
            edgeClass: step.class, count: 1, width: 3 } });
      });
    });
    const nodes = found.nodes.filter((n) => positions["n" + n.id]).map((n) => {
      const el = nodeElement(n);
      el.position = positions["n" + n.id];
      el.classes += " hub";
      return el;
    });
    hasGroups = false;
    hubCache = null;
    cy.batch(() => { cy.elements().remove(); cy.add(nodes.concat(edges)); });
    const ends = [Number(a), Number(b)].map((id) => cy.getElementById("n" + id)).filter((n) => n.nonempty());
    ends.forEach((n) => n.addClass("focus"));
    nameKinds();
    orderLabels();
    buildLegend();
    fit();
    cullLabels();
    refreshNodeList();
    const name = (id) => (byId.get(Number(id)) || { label: "?" }).label;
    const panelEl = $("path-panel");
    const section = document.createElement("section");
    section.className = "panel";
    section.id = "path-details";
    section.append(text("h2", "How " + name(a) + " is connected to " + name(b)));
    if (!found.paths.length) {
      section.append(text("p", "No connection within " + found.maxHops + " steps.", "hint"));
      statusEl.textContent = "No connection within " + found.maxHops + " steps.";
    } else {
      found.paths.forEach((path, i) => {
        section.append(text("h3", "Path " + (i + 1) + " · " + path.steps.length + " step" + (path.steps.length === 1 ? "" : "s")));
        const list = document.createElement("ol");
        list.className = "path-steps";
        path.steps.forEach((step) => {
          const li = text("li", step.text);
          li.dataset.edgeType = step.type;
          list.append(li);
        });
        section.append(list);
      });
      statusEl.textContent = name(a) + " → " + name(b) + ": " + found.paths.length + " shortest path" + (found.paths.length === 1 ? "" : "s") + " of " + found.hops + " step" + (found.hops === 1 ? "" : "s");
    }
    panelEl.replaceChildren(section);
    openDetails();
    requestAnimationFrame(() => requestAnimationFrame(() => {
      if (token !== loadToken) return;
      canvas.dataset.ready = "1";
      document.dispatchEvent(new CustomEvent("graph:ready"));
    }));
  }

  // --- drawers (narrow screens) -------------------------------------------------------------------------------
  function toggleDrawer(id, open) {
    const drawer = $(id);
    const toggle = document.querySelector("[aria-controls='" + id + "']");
    const now = open === undefined ? !drawer.classList.contains("open") : open;
    drawer.classList.toggle("open", now);
    if (toggle) toggle.setAttribute("aria-expanded", String(now));
  }
  $("toggle-filters").addEventListener("click", () => toggleDrawer("filters-drawer"));
  $("toggle-details").addEventListener("click", () => toggleDrawer("details-drawer"));
  document.querySelectorAll(".drawer-close").forEach((b) => b.addEventListener("click", () => toggleDrawer(b.dataset.close, false)));

  // On a phone the legend starts folded: the canvas needs the room.
  if (window.matchMedia("(max-width: 900px)").matches) $("graph-legend").open = false;
  formFromUrl();
  load();
  window.cairnExplorer = { cy, load, cullLabels }; // for the browser tests and the render benchmark
})();
