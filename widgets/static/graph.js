// The community graph drawn on a <canvas>: an anywidget ES module (https://anywidget.dev).
//
// The layout comes from Python (traits `groups`, `nodes`, `edges`, in pixels of the first view); this script
// draws it, zooms (wheel) and pans (drag), shows full names on hover, places labels greedily by PageRank
// (skipping any whose box would cover a placed one, measured at the current zoom), and toggles a group's
// expansion on click by writing the synced `expanded` trait, which Python answers with the group's files, or
// with its folders first (groups of kind "part", drawn inside it) when it has too many files to read as dots,
// or its sub-communities (kind "sub") when those files share one folder.

const FONT_PX = 12;
const FONT = `${FONT_PX}px system-ui, -apple-system, "Segoe UI", sans-serif`;
const HIT_MIN_PX = 5; // small dots are still easy to point at

function el(tag, style, text) {
  const node = document.createElement(tag);
  Object.assign(node.style, style);
  if (text) node.textContent = text;
  return node;
}

function rgba(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

// The colour mixed with black: label text keeps its group's hue but stays dark enough to read.
function shade(hex, dark) {
  const n = parseInt(hex.slice(1), 16);
  const f = (c) => Math.round(c * (1 - dark));
  return `rgb(${f((n >> 16) & 255)},${f((n >> 8) & 255)},${f(n & 255)})`;
}

function boxesOverlap(a, b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

function boxHitsDisc(box, disc) {
  const nx = Math.min(Math.max(disc.x, box.x), box.x + box.w);
  const ny = Math.min(Math.max(disc.y, box.y), box.y + box.h);
  return (nx - disc.x) ** 2 + (ny - disc.y) ** 2 < disc.r * disc.r;
}

function render({ model, el: host }) {
  const root = el("div", {
    position: "relative",
    fontFamily: "system-ui, sans-serif",
    fontSize: "12px",
    border: "1px solid #ddd",
    borderRadius: "4px",
    background: "#fff",
    maxWidth: "100%",
  });
  root.className = "aries-graph";
  const bar = el("div", {
    display: "flex",
    gap: "8px",
    alignItems: "center",
    padding: "4px 6px",
    borderBottom: "1px solid #eee",
    color: "#555",
  });
  const fitButton = el("button", { cursor: "pointer" }, "Fit");
  const collapseButton = el("button", { cursor: "pointer" }, "Collapse all");
  const summary = el("span", { marginLeft: "auto" });
  bar.append(fitButton, collapseButton, el("span", {}, "scroll: zoom · drag: pan · click a community: expand"), summary);
  const canvas = el("canvas", { display: "block", cursor: "grab", touchAction: "none" });
  const tip = el("div", {
    position: "absolute",
    pointerEvents: "none",
    display: "none",
    background: "rgba(255,255,255,0.96)",
    border: "1px solid #bbb",
    borderRadius: "3px",
    padding: "4px 6px",
    boxShadow: "0 1px 4px rgba(0,0,0,0.2)",
    maxWidth: "420px",
    whiteSpace: "pre-line",
    color: "#222",
    zIndex: 10,
  });
  tip.className = "aries-graph-tip";
  root.append(bar, canvas, tip);
  host.appendChild(root);

  const ctx = canvas.getContext("2d");
  let data = { groups: [], nodes: [], edges: [], byId: new Map(), maxWeight: 1, total: 1 };
  let view = { k: 1, tx: 0, ty: 0 };
  let size = { w: model.get("width"), h: model.get("height") };
  let hovered = null;
  let drag = null;
  let focus = null; // a group just clicked open

  function load() {
    const groups = model.get("groups") || [];
    const nodes = model.get("nodes") || [];
    const edges = model.get("edges") || [];
    const byId = new Map();
    for (const g of groups) byId.set(g.key, { ...g, type: "group" });
    for (const n of nodes) byId.set(n.id, { ...n, type: "file", colour: byId.get(n.group)?.colour || "#888" });
    const maxWeight = edges.reduce((m, e) => Math.max(m, e[2]), 0) || 1;
    const top = groups.filter((g) => !g.parent); // a part's files are its group's too
    const total = top.reduce((s, g) => s + g.pagerank, 0) || 1;
    const files = top.reduce((s, g) => s + g.files, 0);
    data = { groups, nodes, edges, byId, maxWeight, total };
    summary.textContent = `${files} files · ${top.length} groups · ${nodes.length} shown`;
  }

  function fit() {
    const gs = data.groups;
    if (!gs.length) {
      view = { k: 1, tx: 0, ty: 0 };
      return;
    }
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const g of gs) {
      x0 = Math.min(x0, g.x - g.r);
      y0 = Math.min(y0, g.y - g.r);
      x1 = Math.max(x1, g.x + g.r);
      y1 = Math.max(y1, g.y + g.r);
    }
    const margin = 36;
    const k = Math.min((size.w - 2 * margin) / (x1 - x0 || 1), (size.h - 2 * margin) / (y1 - y0 || 1));
    view = { k, tx: size.w / 2 - k * (x0 + x1) / 2, ty: size.h / 2 - k * (y0 + y1) / 2 };
  }

  const sx = (x) => x * view.k + view.tx;
  const sy = (y) => y * view.k + view.ty;

  function resize() {
    const width = Math.max(200, Math.min(model.get("width"), host.clientWidth || model.get("width")));
    size = { w: width, h: model.get("height") };
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(size.w * dpr);
    canvas.height = Math.round(size.h * dpr);
    canvas.style.width = `${size.w}px`;
    canvas.style.height = `${size.h}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  function isNeighbour(id) {
    if (!hovered) return false;
    for (const [a, b] of data.edges) if ((a === hovered.id && b === id) || (b === hovered.id && a === id)) return true;
    return false;
  }

  function placeLabels() {
    // Groups first, then files, each by descending PageRank; a label takes the first free spot around its disc.
    const items = [];
    for (const g of data.groups) items.push({ id: g.key, text: g.short, x: sx(g.x), y: sy(g.y), r: g.r * view.k, rank: 2 + g.pagerank, bold: !g.expanded, inside: !g.expanded, colour: g.colour, owner: g.key });
    for (const n of data.nodes) items.push({ id: n.id, text: n.short, x: sx(n.x), y: sy(n.y), r: n.r * view.k, rank: n.pagerank, bold: false, inside: false, colour: data.byId.get(n.id).colour, owner: n.group });
    items.sort((a, b) => b.rank - a.rank || (a.id < b.id ? -1 : 1));
    const placed = [];
    const h = FONT_PX + 4;
    // Labels keep off the discs of other groups where they can.
    const discs = data.groups.map((g) => ({ key: g.key, x: sx(g.x), y: sy(g.y), r: g.r * view.k }));
    for (const item of items) {
      if (item.x + item.r < -300 || item.y + item.r < -50 || item.x - item.r > size.w + 300 || item.y - item.r > size.h + 50) continue;
      ctx.font = item.bold ? `600 ${FONT}` : FONT;
      const w = ctx.measureText(item.text).width + 4;
      // A label that fits inside its own solid disc goes in its middle: no doubt whose it is.
      const fits = item.inside && h < item.r && w / 2 <= Math.sqrt(item.r * item.r - (h * h) / 4) - 2;
      const middle = fits ? [[item.x - w / 2, item.y - h / 2]] : [];
      const spots = [
        ...middle,
        [item.x - w / 2, item.y + item.r + 2],
        [item.x - w / 2, item.y - item.r - 2 - h],
        [item.x + item.r + 3, item.y - h / 2],
        [item.x - item.r - 3 - w, item.y - h / 2],
      ];
      const free = spots
        .map(([x, y]) => ({ x, y, w, h, item }))
        .filter((box) => box.x >= 0 && box.y >= 0 && box.x + w <= size.w && box.y + h <= size.h)
        .filter((box) => !placed.some((other) => boxesOverlap(box, other)));
      const clear = free.filter((box) => !discs.some((d) => d.key !== item.owner && boxHitsDisc(box, d)));
      if (clear.length || free.length) placed.push((clear.length ? clear : free)[0]);
    }
    return placed;
  }

  function draw() {
    ctx.clearRect(0, 0, size.w, size.h);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, size.w, size.h);
    const { byId, maxWeight } = data;
    // Edges first, under the discs, trimmed at their rims; darker and wider with weight.
    for (const [a, b, w] of data.edges) {
      const p = byId.get(a), q = byId.get(b);
      if (!p || !q) continue;
      const x1 = sx(p.x), y1 = sy(p.y), x2 = sx(q.x), y2 = sy(q.y);
      const d = Math.hypot(x2 - x1, y2 - y1);
      const ra = p.r * view.k, rb = q.r * view.k;
      if (d <= ra + rb) continue;
      const ux = (x2 - x1) / d, uy = (y2 - y1) / d;
      const strength = Math.sqrt(w / maxWeight);
      const lit = hovered && (hovered.id === a || hovered.id === b);
      ctx.beginPath();
      ctx.moveTo(x1 + ux * ra, y1 + uy * ra);
      ctx.lineTo(x2 - ux * rb, y2 - uy * rb);
      ctx.strokeStyle = lit ? "rgba(20,20,20,0.85)" : `rgba(80,80,80,${0.12 + 0.45 * strength})`;
      ctx.lineWidth = (lit ? 1 : 0.5) + 4 * strength;
      ctx.stroke();
    }
    // Discs of the groups: solid when collapsed, a tinted area holding the files when expanded.
    for (const g of data.groups) {
      ctx.beginPath();
      ctx.arc(sx(g.x), sy(g.y), Math.max(g.r * view.k, 1), 0, 2 * Math.PI);
      ctx.fillStyle = g.expanded ? rgba(g.colour, 0.1) : g.colour;
      ctx.fill();
      ctx.lineWidth = hovered && hovered.id === g.key ? 3 : g.expanded ? 1.5 : 1;
      ctx.strokeStyle = g.expanded ? g.colour : "rgba(0,0,0,0.35)";
      if (g.kind === "folder" || g.kind === "rest") ctx.setLineDash([4, 3]);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    for (const n of data.nodes) {
      const node = byId.get(n.id);
      ctx.beginPath();
      ctx.arc(sx(n.x), sy(n.y), Math.max(n.r * view.k, 1.5), 0, 2 * Math.PI);
      ctx.fillStyle = rgba(node.colour, 0.9);
      ctx.fill();
      const lit = hovered && (hovered.id === n.id || isNeighbour(n.id));
      ctx.lineWidth = lit ? 2.5 : 0.75;
      ctx.strokeStyle = lit ? "#111" : "#fff";
      ctx.stroke();
    }
    // Labels with a white halo, so they read over edges and discs.
    ctx.textBaseline = "top";
    ctx.lineJoin = "round";
    const labels = placeLabels();
    for (const { x, y, item } of labels) {
      ctx.font = item.bold ? `600 ${FONT}` : FONT;
      ctx.lineWidth = 3;
      ctx.strokeStyle = "rgba(255,255,255,0.9)";
      ctx.strokeText(item.text, x + 2, y + 2);
      ctx.fillStyle = shade(item.colour, 0.45);
      ctx.fillText(item.text, x + 2, y + 2);
    }
    // The current view and label boxes, for tests and debugging from the page.
    canvas.dataset.view = JSON.stringify(view);
    canvas.dataset.labels = JSON.stringify(labels.map(({ x, y, w, h, item }) => ({ id: item.id, text: item.text, x, y, w, h })));
  }

  function hit(px, py) {
    // Files first (they lie on top of their expanded group), the nearest within reach.
    let best = null, bestD = Infinity;
    for (const n of data.nodes) {
      const d = Math.hypot(sx(n.x) - px, sy(n.y) - py);
      if (d <= Math.max(n.r * view.k, HIT_MIN_PX) && d < bestD) {
        best = data.byId.get(n.id);
        bestD = d;
      }
    }
    if (best) return best;
    // The last drawn first: a part lies on top of the group it is in.
    for (let i = data.groups.length - 1; i >= 0; i--) {
      const g = data.groups[i];
      if (Math.hypot(sx(g.x) - px, sy(g.y) - py) <= Math.max(g.r * view.k, HIT_MIN_PX)) return data.byId.get(g.key);
    }
    return null;
  }

  function describe(item) {
    if (item.type === "group") {
      const share = ((100 * item.pagerank) / data.total).toFixed(1);
      const kinds = { folder: "files in no large community", rest: "files that are not source", part: "folder", sub: "sub-community" };
      const kind = kinds[item.kind] || "community";
      const action = item.expanded ? "click to collapse" : "click to expand";
      return `${item.label}\n${kind} · ${item.files} files · PageRank ${share}% of all\n${action}`;
    }
    const group = data.byId.get(item.group);
    return `${item.id}\nPageRank ${item.pagerank.toPrecision(3)} · ${group ? group.short : ""}`;
  }

  function showTip(item, px, py) {
    if (!item) {
      tip.style.display = "none";
      return;
    }
    tip.textContent = describe(item);
    tip.style.display = "block";
    const top = canvas.offsetTop;
    const left = Math.min(px + 14, size.w - tip.offsetWidth - 4);
    tip.style.left = `${Math.max(0, left)}px`;
    tip.style.top = `${top + (py + 14 + tip.offsetHeight > size.h ? py - tip.offsetHeight - 8 : py + 14)}px`;
  }

  function local(event) {
    const rect = canvas.getBoundingClientRect();
    return [event.clientX - rect.left, event.clientY - rect.top];
  }

  function setExpanded(keys) {
    model.set("expanded", keys);
    model.save_changes();
  }

  function toggle(item) {
    if (item.type !== "group") return;
    const open = model.get("expanded") || [];
    if (item.expanded) {
      // A part's key starts with its group's: folding a group folds what was opened inside it.
      setExpanded(open.filter((k) => k !== item.key && !k.startsWith(`${item.key}/`)));
    } else {
      focus = item.key; // zoom to it once its files arrive
      setExpanded([...open, item.key]);
    }
  }

  function zoomTo(group) {
    // The expanded disc fills most of the view, unless it is already large on screen.
    const k = Math.max(view.k, (0.42 * Math.min(size.w, size.h)) / group.r);
    view = { k, tx: size.w / 2 - k * group.x, ty: size.h / 2 - k * group.y };
  }

  const onWheel = (event) => {
    event.preventDefault();
    const [px, py] = local(event);
    const factor = Math.exp(-event.deltaY * 0.0015);
    const k = Math.min(Math.max(view.k * factor, 0.05), 200);
    view = { k, tx: px - ((px - view.tx) * k) / view.k, ty: py - ((py - view.ty) * k) / view.k };
    draw();
  };
  const onDown = (event) => {
    const [px, py] = local(event);
    drag = { px, py, tx: view.tx, ty: view.ty, moved: false };
    canvas.setPointerCapture?.(event.pointerId);
    canvas.style.cursor = "grabbing";
  };
  const onMove = (event) => {
    const [px, py] = local(event);
    if (drag) {
      if (Math.hypot(px - drag.px, py - drag.py) > 3) drag.moved = true;
      if (drag.moved) {
        view = { ...view, tx: drag.tx + px - drag.px, ty: drag.ty + py - drag.py };
        showTip(null);
        draw();
        return;
      }
    }
    const item = hit(px, py);
    if ((item && item.id ? item.id : item && item.key) !== (hovered && (hovered.id || hovered.key))) {
      hovered = item ? { ...item, id: item.id || item.key } : null;
      draw();
    }
    canvas.style.cursor = item ? "pointer" : "grab";
    showTip(item, px, py);
  };
  const onUp = (event) => {
    const [px, py] = local(event);
    const click = drag && !drag.moved;
    drag = null;
    canvas.style.cursor = "grab";
    if (click) {
      // A click acts on what is under the pointer; the hover box would now describe what it was before.
      showTip(null);
      const item = hit(px, py);
      if (item) toggle(item);
    }
  };
  const onLeave = () => {
    hovered = null;
    showTip(null);
    draw();
  };
  canvas.addEventListener("wheel", onWheel, { passive: false });
  canvas.addEventListener("pointerdown", onDown);
  canvas.addEventListener("pointermove", onMove);
  canvas.addEventListener("pointerup", onUp);
  canvas.addEventListener("pointerleave", onLeave);
  fitButton.addEventListener("click", () => {
    fit();
    draw();
  });
  collapseButton.addEventListener("click", () => setExpanded([]));

  // Fit the view again only when the discs themselves moved (a new layout), not when one opened or closed.
  const placement = () => JSON.stringify((model.get("groups") || []).map((g) => [g.key, g.x, g.y, g.r]));
  let placed = placement();
  const refresh = () => {
    load();
    const opened = focus && data.byId.get(focus);
    const inside = (x) => x.group === focus || x.parent === focus;
    if (opened && opened.expanded && (data.nodes.some(inside) || data.groups.some(inside))) {
      zoomTo(opened);
      focus = null;
    }
    draw();
  };
  const relayout = () => {
    const now = placement();
    if (now !== placed) {
      placed = now;
      load();
      fit();
      draw();
    } else refresh();
  };
  model.on("change:groups", relayout);
  model.on("change:nodes", refresh);
  model.on("change:edges", refresh);
  const onSize = () => {
    resize();
    fit();
    draw();
  };
  model.on("change:width", onSize);
  model.on("change:height", onSize);
  const observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => {
    const before = size.w;
    resize();
    if (size.w !== before) fit();
    draw();
  });
  observer?.observe(host);

  resize();
  load();
  fit();
  draw();

  return () => {
    observer?.disconnect();
    model.off("change:groups", relayout);
    model.off("change:nodes", refresh);
    model.off("change:edges", refresh);
    model.off("change:width", onSize);
    model.off("change:height", onSize);
  };
}

export default { render };
