// The trace page's drawing, read left to right: the query, the memories the baseline ranked (its seeds), the
// nodes the graph went through, and the memories it added. Read-only; a tap opens the memory.
(function () {
  "use strict";
  const source = document.getElementById("trace-data");
  const container = document.getElementById("trace-canvas");
  if (!source || !container) return;
  const data = JSON.parse(source.textContent);
  const COLOURS = { query: "#1f2933", baseline: "#4477AA", expanded: "#009E73", via: "#EE3377" };
  const SHAPES = { query: "round-rectangle", baseline: "ellipse", expanded: "ellipse", via: "diamond" };
  const COLUMN = { query: 0, baseline: 1, via: 2, expanded: 3 };
  const WIDTH = 300, ROW = 48;
  const rows = [0, 0, 0, 0];
  const positions = {};
  data.nodes.forEach((n) => {
    const column = COLUMN[n.kind] === undefined ? 3 : COLUMN[n.kind];
    positions[n.id] = { x: column * WIDTH, y: rows[column] * ROW };
    rows[column] += 1;
  });
  // Each column centred on the tallest one.
  const tallest = Math.max(...rows);
  data.nodes.forEach((n) => {
    const column = COLUMN[n.kind] === undefined ? 3 : COLUMN[n.kind];
    positions[n.id].y += ((tallest - rows[column]) * ROW) / 2;
  });
  // The page's own script may size its box (CSSOM, which the CSP allows): one row per memory, at least 320 px.
  container.style.height = Math.max(320, tallest * ROW + 60) + "px";
  const elements = data.nodes.map((n) => ({ group: "nodes", classes: n.kind, position: positions[n.id],
    data: { id: n.id, label: n.label, colour: COLOURS[n.kind] || "#777777", shape: SHAPES[n.kind] || "ellipse" } }))
    .concat(data.edges.map((e, i) => ({ group: "edges", classes: e.kind, data: { id: "t" + i, source: e.source,
      target: e.target, label: e.label } })));
  const cy = cytoscape({
    container,
    elements,
    pixelRatio: 1,
    minZoom: 0.2,
    maxZoom: 3,
    style: [
      { selector: "node", style: { "background-color": "data(colour)", shape: "data(shape)", label: "data(label)",
        width: 16, height: 16, "font-size": 11, "text-halign": "right", "text-valign": "center", "text-margin-x": 6,
        "text-max-width": 230, "text-wrap": "ellipsis" } },
      { selector: "node.query", style: { width: 26, height: 26, "font-size": 12, "font-weight": "bold",
        "text-halign": "center", "text-valign": "bottom", "text-margin-x": 0, "text-wrap": "wrap",
        "text-max-width": 200 } },
      { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle",
        "line-color": "#9AA5B1", "target-arrow-color": "#9AA5B1", label: "data(label)", "font-size": 9,
        "text-rotation": "autorotate", "text-background-color": "#fff", "text-background-opacity": 0.85 } },
      { selector: "edge.hop", style: { "line-color": "#009E73", "target-arrow-color": "#009E73", width: 2.5 } },
    ],
    layout: { name: "preset", fit: true, padding: 24 },
  });
  cy.on("tap", "node.baseline, node.expanded", (evt) => { window.location.assign(data.memoryBase + evt.target.id() + "/"); });
  container.dataset.ready = "1";
  window.cairnTrace = { cy };
})();
