// Graph explorer: Cytoscape canvas + htmx panels. State lives in the URL (deep links), data comes from
// graph/data as JSON, panels are server-rendered partials. No inline script or style: the CSP forbids both.
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("explorer-config").textContent);
  const FILTER_KEYS = ["graph_et", "graph_nt", "graph_mw", "graph_mc", "graph_ev"];
  const COLOURS = {
    memory: "#4e79a7", memory_type: "#9c755f", repo: "#59a14f", user: "#edc948", category: "#b07aa1",
    topic: "#76b7b2", condition: "#ff9da7", person: "#e15759", tool: "#f28e2b", concept: "#8cd17d",
    project: "#499894", language: "#86bcb6", file: "#bab0ac", config: "#d37295", organization: "#fabfd2",
    event: "#d4a6c8",
  };
  const colour = (type) => COLOURS[type] || "#888888";
  // Above this many nodes a force layout takes seconds; a spiral by degree stays instant.
  const FORCE_LAYOUT_MAX = 250;
  const LABEL_ALL_MAX = 400;
  const HUB_LABELS = 60;

  const form = document.getElementById("graph-filters");
  const statusEl = document.getElementById("graph-status");
  const nodeSelect = document.getElementById("node-select");
  const edgeSelect = document.getElementById("edge-select");
  const expandButton = document.getElementById("graph-expand");
  const canvas = document.getElementById("graph-canvas");
  let selectedNode = null; // cytoscape node
  let selectedEdgeId = null;

  document.querySelectorAll(".swatch[data-node-type]").forEach((el) => {
    el.style.backgroundColor = colour(el.dataset.nodeType);
  });

  const cy = cytoscape({
    container: canvas,
    textureOnViewport: true,
    hideLabelsOnViewport: true,
    hideEdgesOnViewport: true,
    motionBlur: false,
    minZoom: 0.05,
    maxZoom: 4,
    style: [
      { selector: "node", style: {
        "background-color": "data(colour)", label: "data(label)", "font-size": 10, width: "data(size)",
        height: "data(size)", "min-zoomed-font-size": 8, "text-max-width": 120, "text-wrap": "ellipsis" } },
      { selector: "node.quiet", style: { label: "" } },
      { selector: "node.quiet:selected", style: { label: "data(label)" } },
      { selector: "edge", style: {
        width: "data(width)", "line-color": "#9aa5b1", "target-arrow-color": "#9aa5b1",
        "target-arrow-shape": "triangle", "curve-style": "haystack", opacity: 0.7 } },
      { selector: "edge.evidence", style: { "line-style": "solid", "line-color": "#52606d" } },
      { selector: ":selected", style: { "border-width": 3, "border-color": "#111", "line-color": "#d64545",
        "target-arrow-color": "#d64545", opacity: 1 } },
    ],
  });

  // --- URL state -----------------------------------------------------------------------------------------------
  function params() { return new URLSearchParams(window.location.search); }

  function setParams(changes) {
    const p = params();
    Object.entries(changes).forEach(([key, value]) => {
      p.delete(key);
      (Array.isArray(value) ? value : [value]).forEach((v) => { if (v !== null && v !== undefined && v !== "") p.append(key, v); });
    });
    const query = p.toString();
    history.replaceState(null, "", window.location.pathname + (query ? "?" + query : ""));
  }

  function filtersFromForm() {
    const data = new FormData(form);
    return {
      graph_et: data.getAll("graph_et"), graph_nt: data.getAll("graph_nt"),
      graph_mw: data.get("graph_mw") || "", graph_mc: data.get("graph_mc") || "",
      graph_ev: data.get("graph_ev") ? "1" : "",
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
  }

  function dataQuery(extra) {
    const q = new URLSearchParams();
    const p = params();
    FILTER_KEYS.forEach((key) => p.getAll(key).forEach((v) => q.append(key, v)));
    if (p.get("graph_limit")) q.set("limit", p.get("graph_limit")); // more top nodes than the default
    Object.entries(extra || {}).forEach(([k, v]) => q.set(k, v));
    return config.dataUrl + "?" + q.toString();
  }

  // --- data → canvas -------------------------------------------------------------------------------------------
  function toElements(payload) {
    // Thousands of labels cost more to draw than the nodes: big views label only the hubs (the server sends
    // nodes best-connected first) and the selection. Set here, before adding, to avoid a second style pass.
    const quiet = payload.nodes.length > LABEL_ALL_MAX;
    const nodes = payload.nodes.map((n, i) => ({ group: "nodes", classes: quiet && i >= HUB_LABELS ? "quiet" : "", data: {
      id: "n" + n.id, dbId: n.id, type: n.type, key: n.key, label: n.label || n.key, colour: colour(n.type),
      degree: n.degree || 0, size: Math.min(40, 12 + Math.sqrt(n.degree || 0) * 3) } }));
    const edges = payload.edges.map((e) => ({ group: "edges", classes: e.evidence ? "evidence" : "", data: {
      id: "e" + e.id, dbId: e.id, source: "n" + e.source, target: "n" + e.target, type: e.type,
      width: 0.5 + 2.5 * Math.max(0, Math.min(1, e.weight)) } }));
    return nodes.concat(edges);
  }

  function runLayout(focusId) {
    const count = cy.nodes().length;
    let options;
    if (focusId) {
      options = { name: "concentric", concentric: (n) => (n.id() === focusId ? 2 : 1), levelWidth: () => 1,
        minNodeSpacing: 60, spacingFactor: 1.5, animate: false };
    } else if (count <= FORCE_LAYOUT_MAX) {
      options = { name: "cose", animate: false, numIter: 600, randomize: true, nodeRepulsion: () => 6000 };
    } else {
      // Big views: a golden-angle spiral, best-connected nodes in the middle. Computing it is O(n log n) and
      // takes milliseconds where a force layout takes seconds; the structure is read from the ego views.
      const positions = {};
      cy.nodes().forEach((n, i) => { // in the server's order: best-connected first
        const radius = 14 * Math.sqrt(i);
        const angle = i * 2.399963;
        positions[n.id()] = { x: radius * Math.cos(angle), y: radius * Math.sin(angle) };
      });
      options = { name: "preset", positions: (n) => positions[n.id()], animate: false };
    }
    const layout = cy.layout(options);
    layout.one("layoutstop", () => {
      cy.fit(undefined, 20);
      // A handful of nodes would otherwise be blown up to fill the canvas.
      if (cy.zoom() > 1.2) { cy.zoom(1.2); cy.center(); }
      canvas.dataset.readyMs = String(Math.round(performance.now()));
      canvas.dataset.ready = "1";
      document.dispatchEvent(new CustomEvent("graph:ready"));
    });
    layout.run();
  }

  async function fetchGraph(extra) {
    const response = await fetch(dataQuery(extra), { headers: { Accept: "application/json" }, credentials: "same-origin" });
    const payload = await response.json();
    if (!response.ok) throw new Error(payload.error ? payload.error.message : "HTTP " + response.status);
    return payload;
  }

  function describe(payload) {
    const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");
    const text = plural(cy.nodes().length, "node") + ", " + plural(cy.edges().length, "edge") +
      (payload && payload.truncated ? " (more exist: narrow the filters or focus a node)" : "");
    statusEl.textContent = text;
  }

  async function load() {
    canvas.dataset.ready = "0";
    statusEl.textContent = "Loading…";
    const p = params();
    const focused = p.get("graph_node_type") && p.get("graph_node_key");
    try {
      performance.mark("graph:fetch");
      const payload = await fetchGraph(focused ? { graph_node_type: p.get("graph_node_type"), graph_node_key: p.get("graph_node_key") } : {});
      performance.mark("graph:fetched");
      cy.batch(() => { cy.elements().remove(); cy.add(toElements(payload)); });
      performance.mark("graph:added");
      runLayout(payload.focus ? "n" + payload.focus.id : null);
      describe(payload);
      refreshNodeList();
      if (payload.focus) selectNode(cy.getElementById("n" + payload.focus.id), { keepEdge: true });
      const edgeId = p.get("graph_edge_id");
      if (edgeId) selectEdge(edgeId);
    } catch (error) {
      statusEl.textContent = "Could not load the graph: " + error.message;
      canvas.dataset.ready = "error";
    }
  }

  async function expand() {
    if (!selectedNode) return;
    const payload = await fetchGraph({ graph_node_type: selectedNode.data("type"), graph_node_key: selectedNode.data("key") });
    const fresh = toElements(payload).filter((el) => cy.getElementById(el.data.id).empty());
    cy.batch(() => cy.add(fresh));
    const around = selectedNode.position();
    cy.nodes().filter((n) => !n.position().x && !n.position().y).forEach((n, i) => {
      n.position({ x: around.x + 80 * Math.cos(i), y: around.y + 80 * Math.sin(i) });
    });
    describe(payload);
    refreshNodeList();
    refreshEdgeList();
  }

  // --- selection and panels ------------------------------------------------------------------------------------
  function option(value, text) {
    const el = document.createElement("option");
    el.value = value;
    el.textContent = text; // textContent: labels come from users and must never be parsed as HTML
    return el;
  }

  function refreshNodeList() {
    nodeSelect.replaceChildren(...cy.nodes().slice(0, 500).map((n) => option(n.id(), n.data("label") + " (" + n.data("type") + ")")));
    if (selectedNode) nodeSelect.value = selectedNode.id();
  }

  function refreshEdgeList() {
    const edges = selectedNode ? selectedNode.connectedEdges() : cy.edges().slice(0, 200);
    edgeSelect.replaceChildren(...edges.map((e) => option(e.data("dbId"),
      e.source().data("label") + " —" + e.data("type") + "→ " + e.target().data("label"))));
    if (selectedEdgeId) edgeSelect.value = String(selectedEdgeId);
  }

  function loadNodePanel() {
    if (!selectedNode) return;
    const evidence = document.querySelector("#edge-details") ? document.querySelector("#edge-details").dataset.evidence : "";
    const q = new URLSearchParams({ graph_node_type: selectedNode.data("type"), graph_node_key: selectedNode.data("key"), evidence: evidence || "" });
    htmx.ajax("GET", config.nodeUrl + "?" + q.toString(), { source: "#node-panel", target: "#node-panel", swap: "innerHTML" });
  }

  function selectNode(node, opts) {
    if (!node || node.empty()) return;
    selectedNode = node;
    cy.$(":selected").unselect();
    node.select();
    expandButton.disabled = false;
    nodeSelect.value = node.id();
    setParams({ graph_node_type: node.data("type"), graph_node_key: node.data("key") });
    if (!(opts && opts.keepEdge)) { selectedEdgeId = null; setParams({ graph_edge_id: "" }); }
    refreshEdgeList();
    loadNodePanel();
  }

  function selectEdge(edgeId) {
    selectedEdgeId = String(edgeId);
    const edge = cy.getElementById("e" + edgeId);
    if (!edge.empty()) { edge.select(); }
    setParams({ graph_edge_id: selectedEdgeId });
    edgeSelect.value = selectedEdgeId;
    htmx.ajax("GET", config.edgeUrl + encodeURIComponent(selectedEdgeId) + "/", { source: "#edge-panel", target: "#edge-panel", swap: "innerHTML" })
      .then(loadNodePanel);
  }

  function focusNode(node) {
    setParams({ graph_node_type: node.data("type"), graph_node_key: node.data("key"), graph_edge_id: "" });
    selectedNode = null;
    selectedEdgeId = null;
    load();
  }

  cy.on("tap", "node", (evt) => selectNode(evt.target));
  cy.on("dbltap", "node", (evt) => focusNode(evt.target));
  cy.on("tap", "edge", (evt) => selectEdge(evt.target.data("dbId")));

  nodeSelect.addEventListener("change", () => selectNode(cy.getElementById(nodeSelect.value)));
  nodeSelect.addEventListener("keydown", (evt) => {
    if (evt.key === "Enter" && nodeSelect.value) { evt.preventDefault(); focusNode(cy.getElementById(nodeSelect.value)); }
  });
  edgeSelect.addEventListener("change", () => selectEdge(edgeSelect.value));
  expandButton.addEventListener("click", () => expand());

  form.addEventListener("submit", (evt) => {
    evt.preventDefault();
    setParams(filtersFromForm());
    load();
  });
  document.getElementById("graph-reset").addEventListener("click", () => {
    selectedNode = null;
    selectedEdgeId = null;
    expandButton.disabled = true;
    setParams({ graph_node_type: "", graph_node_key: "", graph_edge_id: "" });
    document.getElementById("edge-panel").replaceChildren();
    document.getElementById("node-panel").replaceChildren();
    load();
  });

  formFromUrl();
  load();
  window.cairnExplorer = { cy }; // for the browser tests and the render benchmark
})();
