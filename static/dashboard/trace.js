// The trace page's drawing: the query, the memories the baseline ranked (its seeds), and for each memory the
// graph added, the node it came through and the seed it started from. Read-only; a tap opens the memory.
(function () {
  "use strict";
  const source = document.getElementById("trace-data");
  const container = document.getElementById("trace-canvas");
  if (!source || !container) return;
  const data = JSON.parse(source.textContent);
  const COLOURS = { query: "#1f2933", baseline: "#4477AA", expanded: "#009E73", via: "#EE3377", rule: "#BBBBBB" };
  const SHAPES = { query: "round-rectangle", baseline: "ellipse", expanded: "ellipse", via: "diamond", rule: "round-rectangle" };
  const elements = data.nodes.map((n) => ({ group: "nodes", classes: n.kind, data: { id: n.id, label: n.label,
    colour: COLOURS[n.kind], shape: SHAPES[n.kind], kind: n.kind } }))
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
        width: 18, height: 18, "font-size": 10, "text-valign": "bottom", "text-max-width": 130, "text-wrap": "wrap",
        "text-background-color": "#fff", "text-background-opacity": 0.8 } },
      { selector: "node.query", style: { width: 30, height: 30, "font-size": 12, "font-weight": "bold" } },
      { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle",
        "line-color": "#9AA5B1", "target-arrow-color": "#9AA5B1", label: "data(label)", "font-size": 9,
        "text-rotation": "autorotate", "text-background-color": "#fff", "text-background-opacity": 0.8 } },
      { selector: "edge.hop", style: { "line-color": "#009E73", "target-arrow-color": "#009E73", width: 2.5 } },
      { selector: "edge.rule", style: { "line-style": "dotted" } },
    ],
    // The query in the middle, what the baseline ranked around it, then the nodes the graph went through and
    // the memories it added outside: provenance reads from the centre out.
    layout: { name: "concentric", animate: false, minNodeSpacing: 70, levelWidth: () => 1,
      concentric: (n) => ({ query: 4, baseline: 3, via: 2, expanded: 1 })[n.data("kind")] || 1 },
  });
  cy.on("tap", "node.baseline, node.expanded", (evt) => { window.location.assign(data.memoryBase + evt.target.id() + "/"); });
  container.dataset.ready = "1";
  window.cairnTrace = { cy };
})();
