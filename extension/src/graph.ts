/**
 * The folded trace graph (`application/vnd.tripy-lab.graph+json`, built by tripy_lab.lab.graph_model).
 *
 * The bundle holds the whole hierarchy: nodes (modules, frontend calls, runs of consecutive nodes, and the
 * trace's ops, inputs and outputs as leaves) and the edges between leaves. The browser draws one visible level
 * at a time with the wasm build of graphviz: the top level, with the groups in `expanded` opened in place as
 * clusters; each edge joins the visible nodes holding its ends (tripy_lab.lab.graph_draw.level_dot builds the
 * same DOT for the static pictures). So expanding, searching and selecting need no kernel.
 *
 *   click a closed group         open it in place (and select it)
 *   click an open group's frame  close it
 *   click a leaf                 select it: its inputs and users are marked too
 *   breadcrumbs                  the path to the last opened group; a crumb closes what is below it
 *   search                       op name (%t5), module path (h.0.attn), source line (model.py:42), op kind
 *
 * Stable DOM (tests): [data-tripy-graph] root; g.node[data-node-id] (the model's node id: "op-%t5",
 * "m:h.0.attn", "c:12", ...); g.cluster[data-node-id]; .tripy-selected / .tripy-input / .tripy-user /
 * .tripy-error on nodes; [data-tripy-crumbs]; input[data-tripy-search]; .tripy-graph-legend.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { dotText, sanitizeSvg } from './sanitize';
import { button, dotToSvg, el, GraphZoom } from './zoom';

export const GRAPH_MIME = 'application/vnd.tripy-lab.graph+json';

export interface IGraphNode {
  i: string; // id
  l: string; // label
  k: string; // kind: op, const, input, output, module, call, run, failed
  p: number; // parent index, -1 at the top
  s: string; // user line
  m: string; // module path
  t: string; // tooltip
  n: number; // ops under it
  c?: number[]; // children, in drawing order
}

export interface IOverlay {
  title: string;
  unit: string;
  aggregate: string;
  total: number;
  values: { [node: string]: number };
}

export interface IGraphBundle {
  version: number;
  title: string;
  nodes: IGraphNode[];
  top: number[];
  edges: number[][];
  expanded: number[];
  error: number | null;
  errorMessage?: string;
  overlay: IOverlay | null;
}

const FILL: { [kind: string]: string } = {
  op: '#f3f4f6',
  const: '#fef3c7',
  input: '#dbeafe',
  output: '#dcfce7',
  module: '#e0e7ff',
  call: '#f3f4f6',
  run: '#ede9fe',
  failed: '#fecaca'
};
const SHAPE: { [kind: string]: string } = { const: 'note', input: 'invhouse', output: 'house' };
const RED = '#dc2626';
const FANOUT = 4;

/** tripy_lab.trace.graph.dot_quote: the one way a string enters DOT. */
export function dotQuote(text: string, kind: 'label' | 'id' | 'tooltip' = 'label'): string {
  let t = dotText(text).replace(/&/g, '&amp;');
  t = kind === 'tooltip' ? t.replace(/\\/g, '\u2216') : t.replace(/\\/g, '\\\\');
  if (kind === 'id') {
    t = t.replace(/\n/g, '&#10;');
  } else if (kind === 'label') {
    t = t.replace(/\n/g, '\\n');
  }
  return '"' + t.replace(/"/g, '\\"') + '"';
}

/** graph_draw.shade: white (0) to deep orange (1). */
export function shade(fraction: number): string {
  const f = Math.min(Math.max(fraction, 0), 1);
  const lo = [255, 247, 237];
  const hi = [234, 88, 12];
  return '#' + lo.map((a, k) => Math.round(a + (hi[k] - a) * f).toString(16).padStart(2, '0')).join('');
}

function fmt(value: number, unit: string): string {
  return `${Number(value.toPrecision(3))} ${unit}`.trim();
}

/** The model with its derived tables: ancestors, leaves, the node of each id. */
export class GraphModel {
  constructor(readonly bundle: IGraphBundle) {
    this.nodes = bundle.nodes;
    this.nodes.forEach((n, i) => this.byId.set(n.i, i));
  }

  ancestors(i: number): number[] {
    const out: number[] = [];
    for (let p = this.nodes[i].p; p >= 0; p = this.nodes[p].p) {
      out.push(p);
    }
    return out;
  }

  leaves(i: number): number[] {
    const out: number[] = [];
    const stack = [i];
    while (stack.length) {
      const j = stack.pop() as number;
      const kids = this.nodes[j].c;
      if (kids && kids.length) {
        stack.push(...kids.slice().reverse());
      } else {
        out.push(j);
      }
    }
    return out;
  }

  /** Trace op names under node `i` (the crosswalk selects their MLIR lines and layers). */
  ops(i: number): string[] {
    return this.leaves(i)
      .map(j => this.nodes[j].i)
      .filter(id => id.startsWith('op-'))
      .map(id => id.slice(3));
  }

  /** graph_draw.visible: the node standing for each node, given the open groups. */
  reps(expanded: Set<number>): Int32Array {
    const rep = new Int32Array(this.nodes.length).fill(-1);
    const cut = (i: number): number => {
      if (rep[i] >= 0) {
        return rep[i];
      }
      const p = this.nodes[i].p;
      if (p < 0) {
        rep[i] = i;
      } else {
        const c = cut(p);
        rep[i] = c !== p ? c : expanded.has(p) ? i : p;
      }
      return rep[i];
    };
    for (let i = 0; i < this.nodes.length; i++) {
      cut(i);
    }
    return rep;
  }

  /** Search: a node id, a module path, a user line, an op kind or label (first match in drawing order). */
  search(query: string): number | null {
    const q = query.trim();
    if (!q) {
      return null;
    }
    const exact = this.byId.get(q) ?? this.byId.get('op-' + q) ?? this.byId.get('m:' + q);
    if (exact !== undefined) {
      return exact;
    }
    const order = this.top.flatMap(i => this.walk(i));
    const lower = q.toLowerCase();
    const tests: ((n: IGraphNode) => boolean)[] = [
      n => !n.c && (n.s === q || n.s.endsWith(q) || n.s.endsWith(' ' + q)),
      n => !n.c && n.s.toLowerCase().includes(lower),
      n => n.m.toLowerCase() === lower,
      n => n.l.toLowerCase().includes(lower) || n.m.toLowerCase().includes(lower)
    ];
    for (const test of tests) {
      const hit = order.find(i => test(this.nodes[i]));
      if (hit !== undefined) {
        return hit;
      }
    }
    return null;
  }

  get top(): number[] {
    return this.bundle.top;
  }

  private walk(i: number): number[] {
    const kids = this.nodes[i].c ?? [];
    return [i, ...kids.flatMap(k => this.walk(k))];
  }

  readonly nodes: IGraphNode[];
  readonly byId = new Map<string, number>();
}

/** graph_draw.level_dot, in the browser. */
export function levelDot(model: GraphModel, open: Set<number>): { dot: string; edges: [number, number][] } {
  const nodes = model.nodes;
  const expanded = new Set([...open].filter(i => (nodes[i].c ?? []).length));
  const rep = model.reps(expanded);
  const seen = new Map<string, [number, number]>();
  for (const [a, b] of model.bundle.edges) {
    const ra = rep[a];
    const rb = rep[b];
    if (ra !== rb) {
      seen.set(`${ra} ${rb}`, [ra, rb]);
    }
  }
  const fanCount = new Map<number, number>();
  for (const [ra] of seen.values()) {
    const n = nodes[ra];
    if (n.k === 'const' || (n.c && model.leaves(ra).every(j => nodes[j].k === 'const'))) {
      fanCount.set(ra, (fanCount.get(ra) ?? 0) + 1);
    }
  }
  const fan = new Map([...fanCount].filter(([, k]) => k > FANOUT));
  const edges = [...seen.values()].filter(([a]) => !fan.has(a));
  const shown: number[] = [];
  for (let i = 0; i < nodes.length; i++) {
    if (rep[i] === i && !expanded.has(i)) {
      shown.push(i);
    }
  }
  const ov = model.bundle.overlay;
  const values = ov ? ov.values : null;
  const vmax = values ? Math.max(0, ...shown.map(i => values[String(i)] ?? 0)) : 0;
  const err = model.bundle.error;
  const hot = new Set(err === null || err === undefined ? [] : [err, ...model.ancestors(err)]);
  const lines = [
    'digraph trace {',
    '  rankdir=TB;',
    '  node [fontname="Courier", fontsize=10, margin="0.08,0.03"];',
    '  edge [color="#6b7280", arrowsize=0.6];',
    shown.length > 40 ? '  splines=line; nslimit=1; mclimit=0.1;' : '  nslimit=2;'
  ];
  const nodeLine = (i: number, pad: string): string => {
    const n = nodes[i];
    let label = ['input', 'output', 'failed', 'module'].includes(n.k) || !n.s ? n.l : `${n.l}\n${n.s}`;
    if (fan.has(i)) {
      label += `\n(feeds ${fan.get(i)} nodes)`;
    }
    let fill = FILL[n.k] ?? '#f3f4f6';
    let style = ['op', 'const', 'input', 'output', 'failed'].includes(n.k) ? 'filled' : '"rounded,filled"';
    let extra = n.k === 'module' ? ', penwidth=1.6' : '';
    if (n.k === 'call') {
      style = '"rounded,filled,dashed"';
    }
    if (values && values[String(i)] !== undefined && ov) {
      const v = values[String(i)];
      const share = ov.total > 0 && ov.unit === 'ms' ? ` · ${Math.round((100 * v) / ov.total)}%` : '';
      label += `\n${fmt(v, ov.unit)}${share}`;
      fill = shade(vmax > 0 ? v / vmax : 0);
    }
    if (hot.has(i)) {
      extra += `, color="${RED}", penwidth=3` + (n.k === 'failed' ? ', fontcolor="#991b1b"' : '');
    }
    return (
      `${pad}"n${i}" [id=${dotQuote(n.i, 'id')}, shape=${SHAPE[n.k] ?? 'box'}, style=${style}, ` +
      `fillcolor="${fill}"${extra}, label=${dotQuote(label)}, tooltip=${dotQuote(n.t || n.l, 'tooltip')}];`
    );
  };
  const emit = (i: number, pad: string): void => {
    const n = nodes[i];
    if (expanded.has(i)) {
      const color = hot.has(i) ? RED : '#6366f1';
      lines.push(`${pad}subgraph "cluster_n${i}" {`);
      lines.push(
        `${pad}  id=${dotQuote('cl-' + n.i, 'id')}; label=${dotQuote(n.l.split('\n')[0] + '  ▾')}; ` +
          `style="rounded,dashed"; color="${color}"; fontname="Helvetica"; fontsize=11;`
      );
      for (const c of n.c ?? []) {
        emit(c, pad + '  ');
      }
      lines.push(`${pad}}`);
    } else {
      lines.push(nodeLine(i, pad));
    }
  };
  for (const r of model.top) {
    emit(r, '  ');
  }
  for (const [a, b] of edges) {
    lines.push(`  "n${a}" -> "n${b}" [id="e-${a}-${b}"];`);
  }
  lines.push('}');
  return { dot: lines.join('\n'), edges };
}

export interface IFoldedGraphOptions {
  /** Called with the trace ops under the selected node (empty when cleared). */
  onSelect?: (ops: string[], node: number | null) => void;
}

/** The interactive folded graph: toolbar, breadcrumbs, legend and the drawing. */
export class FoldedGraph {
  constructor(bundle: IGraphBundle, options: IFoldedGraphOptions = {}) {
    this.model = new GraphModel(bundle);
    this.options = options;
    this.expanded = new Set(bundle.expanded ?? []);
    this.node = el('div', 'tripy-graph-view');
    this.node.dataset.tripyGraph = '1';
    const bar = el('div', 'tripy-graph-bar');
    this.crumbs = el('span', 'tripy-graph-crumbs');
    this.crumbs.dataset.tripyCrumbs = '1';
    this.searchBox = el('input', 'tripy-graph-search');
    this.searchBox.type = 'search';
    this.searchBox.placeholder = 'search: %t5, h.0.attn, model.py:42, softmax';
    this.searchBox.dataset.tripySearch = '1';
    this.searchBox.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        event.preventDefault();
        void this.find(this.searchBox.value);
      }
    });
    const all = button('expand all', 'Open every group (small programs)');
    all.dataset.tripyAction = 'expand-all';
    const groups = this.model.nodes.filter(n => n.c && n.c.length).length;
    all.disabled = this.model.nodes.length > 400 && groups > 40;
    all.addEventListener('click', () => void this.expandAll());
    const none = button('collapse', 'Back to the top level');
    none.dataset.tripyAction = 'collapse-all';
    none.addEventListener('click', () => void this.setExpanded(new Set()));
    const tools = el('span', 'tripy-tools');
    bar.append(this.crumbs, this.searchBox, all, none, tools);
    this.legend = el('div', 'tripy-graph-legend');
    this.body = el('div', 'tripy-graph-body');
    this.status = el('div', 'tripy-graph-status');
    this.node.append(bar, this.legend, this.body, this.status);
    this.zoom = new GraphZoom(this.node, tools, this.body);
    this.body.addEventListener('click', event => this.onClick(event));
    this.renderLegend();
  }

  /** Draw the current level (layout in the browser); resolves when the picture is in the page. */
  async draw(): Promise<void> {
    const started = performance.now();
    const { dot, edges } = levelDot(this.model, this.expanded);
    this.drawnEdges = edges;
    let text: string;
    try {
      text = await dotToSvg(dot);
    } catch (err) {
      this.body.textContent = `Could not draw the graph: ${err}`;
      return;
    }
    const clean = sanitizeSvg(text);
    if (!clean) {
      this.body.textContent = 'The graph is not valid SVG.';
      return;
    }
    this.body.textContent = '';
    this.body.appendChild(clean.svg);
    this.elements.clear();
    this.edgeElements.clear();
    for (const [g, id] of clean.ids) {
      if (g.classList.contains('node') || g.classList.contains('cluster')) {
        const raw = g.classList.contains('cluster') ? id.replace(/^cl-/, '') : id;
        const index = this.model.byId.get(raw);
        if (index !== undefined) {
          g.setAttribute('data-node-id', raw);
          g.classList.add('tripy-clickable');
          this.elements.set(index, g);
        }
      } else if (g.classList.contains('edge') && id.startsWith('e-')) {
        this.edgeElements.set(id.slice(2), g);
      }
    }
    const err = this.model.bundle.error;
    if (err !== null && err !== undefined) {
      for (const i of [err, ...this.model.ancestors(err)]) {
        this.elements.get(i)?.classList.add('tripy-error');
      }
    }
    this.zoom.attach(clean.svg);
    this.renderCrumbs();
    if (this.selected !== null) {
      this.mark(this.selected);
    }
    this.node.dataset.tripyDrawMs = (performance.now() - started).toFixed(0);
    this.node.dataset.tripyLevel = String(++this.draws);
  }

  async setExpanded(expanded: Set<number>): Promise<void> {
    this.expanded = expanded;
    await this.draw();
  }

  async expand(i: number): Promise<void> {
    const next = new Set(this.expanded);
    for (const a of [i, ...this.model.ancestors(i)]) {
      next.add(a);
    }
    this.lastOpened = i;
    await this.setExpanded(next);
    this.reveal(i);
  }

  /** Scroll the graph so that node or cluster `i` is in view (the page only as far as needed). */
  reveal(i: number): void {
    const target = this.elements.get(i);
    if (!target) {
      return;
    }
    const box = target.getBoundingClientRect();
    const body = this.body.getBoundingClientRect();
    this.body.scrollTop += box.top - body.top - 16;
    this.body.scrollLeft += box.left - body.left - Math.max(16, (body.width - box.width) / 2);
  }

  async collapse(i: number): Promise<void> {
    const next = new Set([...this.expanded].filter(j => j !== i && !this.model.ancestors(j).includes(i)));
    this.lastOpened = this.model.nodes[i].p >= 0 ? this.model.nodes[i].p : null;
    await this.setExpanded(next);
  }

  async expandAll(): Promise<void> {
    const all = new Set<number>();
    this.model.nodes.forEach((n, i) => {
      if (n.c && n.c.length) {
        all.add(i);
      }
    });
    await this.setExpanded(all);
  }

  /** Search and select: opens the groups around the match. */
  async find(query: string): Promise<number | null> {
    const hit = this.model.search(query);
    if (hit === null) {
      this.status.textContent = `No node matches "${query}".`;
      return null;
    }
    const around = this.model.ancestors(hit);
    if (around.some(a => !this.expanded.has(a))) {
      const next = new Set(this.expanded);
      around.forEach(a => next.add(a));
      this.lastOpened = around.length ? around[0] : this.lastOpened;
      this.expanded = next;
      this.selected = hit;
      await this.draw();
    }
    this.select(hit);
    this.reveal(hit);
    return hit;
  }

  /** Select the visible nodes holding trace ops `ops` (a click in the crosswalk's MLIR or layers). */
  showOps(ops: string[]): void {
    const rep = this.model.reps(this.expanded);
    const shown = new Set<number>();
    for (const op of ops) {
      const i = this.model.byId.get('op-' + op);
      if (i !== undefined) {
        shown.add(rep[i]);
      }
    }
    this.clearMarks();
    for (const i of shown) {
      this.elements.get(i)?.classList.add('tripy-selected');
    }
  }

  select(i: number | null): void {
    this.selected = i;
    this.clearMarks();
    if (i === null) {
      this.status.textContent = '';
      this.options.onSelect?.([], null);
      return;
    }
    this.mark(i);
    const n = this.model.nodes[i];
    const v = this.model.bundle.overlay?.values[String(i)];
    const value = v !== undefined && this.model.bundle.overlay ? ` · ${fmt(v, this.model.bundle.overlay.unit)}` : '';
    this.status.textContent = `${n.l.replace(/\n/g, ' ')}${n.s ? '   @ ' + n.s : ''}${n.m ? '   in ' + n.m : ''}${value}`;
    this.options.onSelect?.(this.model.ops(i), i);
  }

  private mark(i: number): void {
    this.elements.get(i)?.classList.add('tripy-selected');
    for (const [a, b] of this.drawnEdges) {
      if (b === i) {
        this.elements.get(a)?.classList.add('tripy-input');
        this.edgeElements.get(`${a}-${b}`)?.classList.add('tripy-input');
      } else if (a === i) {
        this.elements.get(b)?.classList.add('tripy-user');
        this.edgeElements.get(`${a}-${b}`)?.classList.add('tripy-user');
      }
    }
  }

  private clearMarks(): void {
    this.body
      .querySelectorAll('.tripy-selected, .tripy-input, .tripy-user')
      .forEach(n => n.classList.remove('tripy-selected', 'tripy-input', 'tripy-user'));
  }

  private onClick(event: Event): void {
    const target = (event.target as Element).closest('g.node, g.cluster');
    if (!target) {
      return;
    }
    event.stopPropagation();
    const id = target.getAttribute('data-node-id');
    const i = id === null ? undefined : this.model.byId.get(id);
    if (i === undefined) {
      return;
    }
    if (target.classList.contains('cluster')) {
      void this.collapse(i);
      return;
    }
    if ((this.model.nodes[i].c ?? []).length) {
      this.selected = i;
      void this.expand(i).then(() => this.select(i));
      return;
    }
    this.select(this.selected === i ? null : i);
  }

  private renderCrumbs(): void {
    this.crumbs.textContent = '';
    const path = this.lastOpened !== null && this.expanded.has(this.lastOpened)
      ? [...this.model.ancestors(this.lastOpened).reverse(), this.lastOpened]
      : [];
    const top = el('button', 'tripy-crumb', 'top');
    top.type = 'button';
    top.addEventListener('click', () => {
      this.lastOpened = null;
      void this.setExpanded(new Set());
    });
    this.crumbs.appendChild(top);
    for (const i of path) {
      this.crumbs.appendChild(document.createTextNode(' › '));
      const crumb = el('button', 'tripy-crumb', this.model.nodes[i].l.split('\n')[0]);
      crumb.type = 'button';
      crumb.dataset.nodeId = this.model.nodes[i].i;
      crumb.title = 'Close what is opened inside this group';
      crumb.addEventListener('click', () => {
        const keep = new Set([...this.expanded].filter(j => j === i || !this.model.ancestors(j).includes(i)));
        this.lastOpened = i;
        void this.setExpanded(keep);
      });
      this.crumbs.appendChild(crumb);
    }
  }

  private renderLegend(): void {
    const ov = this.model.bundle.overlay;
    const err = this.model.bundle.error;
    this.legend.textContent = '';
    if (err !== null && err !== undefined) {
      const msg = el('div', 'tripy-graph-errormsg', this.model.bundle.errorMessage || 'error');
      this.legend.appendChild(msg);
    }
    if (!ov) {
      return;
    }
    const how = ov.aggregate === 'max' ? 'largest of its ops' : 'sum of its ops';
    this.legend.appendChild(document.createTextNode(`${ov.title}: `));
    for (let k = 0; k <= 4; k++) {
      const swatch = el('span', 'tripy-swatch');
      swatch.style.background = shade(k / 4);
      this.legend.appendChild(swatch);
    }
    this.legend.appendChild(
      document.createTextNode(` less → more (a folded node shows the ${how}; total ${fmt(ov.total, ov.unit)})`)
    );
  }

  readonly node: HTMLDivElement;
  readonly model: GraphModel;
  expanded: Set<number>;
  selected: number | null = null;
  private options: IFoldedGraphOptions;
  private crumbs: HTMLSpanElement;
  private searchBox: HTMLInputElement;
  private legend: HTMLDivElement;
  private body: HTMLDivElement;
  private status: HTMLDivElement;
  private zoom: GraphZoom;
  private elements = new Map<number, Element>();
  private edgeElements = new Map<string, Element>();
  private drawnEdges: [number, number][] = [];
  private lastOpened: number | null = null;
  private draws = 0;
}

/** The mime renderer of the Trace tab's live graph. */
export class GraphWidget extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('tripy-graph-widget');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const bundle = model.data[this._mimeType] as unknown as IGraphBundle;
    this.node.textContent = '';
    if (!bundle || bundle.version !== 1) {
      this.node.appendChild(el('div', 'tripy-crosswalk-message', `tripy-lab: unsupported graph version ${bundle?.version}`));
      return;
    }
    this.graph = new FoldedGraph(bundle);
    this.node.appendChild(this.graph.node);
    await this.graph.draw();
  }

  graph: FoldedGraph | null = null;
  private _mimeType: string;
}

export const graphRendererFactory: IRenderMime.IRendererFactory = {
  // Safe: the only markup is graphviz's SVG of DOT built here from the bundle's text, through sanitizeSvg.
  safe: true,
  mimeTypes: [GRAPH_MIME],
  createRenderer: options => new GraphWidget(options)
};
