/**
 * The folded trace graph (`application/vnd.tripy-lab.graph+json`, built by tripy_lab.lab.views.graph_model).
 *
 * The bundle holds the whole hierarchy: nodes (modules, frontend calls, runs of consecutive nodes, and the
 * trace's ops, inputs and outputs as leaves) and the edges between leaves. The browser draws one visible level
 * at a time with the wasm build of graphviz: the top level, with the groups in `expanded` opened in place as
 * clusters; each edge joins the visible nodes holding its ends (tripy_lab.lab.views.graph_draw.level_dot builds the
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

import { fmt, GRAPH_MIME, GraphModel, IGraphBundle, levelDot, shade } from './graph_level';
import { sanitizeSvg } from './sanitize';
import { button, drawDot, el, GraphZoom } from './zoom';

export { GRAPH_MIME };
export type { IGraphBundle };

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
    this.zoom = new GraphZoom(this.node, tools, this.body, true);
    this.body.addEventListener('click', event => this.onClick(event));
    this.renderLegend();
  }

  /** Draw the current level (layout in the browser); resolves when the picture is in the page. */
  async draw(): Promise<void> {
    const started = performance.now();
    const { dot, edges } = levelDot(this.model, this.expanded);
    this.drawnEdges = edges;
    let text: string;
    let fallback: string | undefined;
    try {
      ({ svg: text, fallback } = await drawDot(dot));
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
    if (fallback) {
      this.body.appendChild(el('div', 'tripy-crosswalk-message', `Laid out with ${fallback}.`));
    }
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
