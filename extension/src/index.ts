/**
 * tripy-lab crosswalk renderer.
 *
 * Renders `application/vnd.tripy-lab.crosswalk+json` (bundle version 1): the
 * linked view of one compile, in three panes:
 *
 *   graph (trace graph SVG) | MLIR (numbered lines) | layers (engine layer table)
 *
 * Clicking a graph node, an MLIR line or a layer row selects its trace op(s)
 * and marks the op's node, MLIR lines and layers with `tripy-selected`;
 * clicking the same thing again clears the selection.  The failing op of
 * `bundle.error` is marked with `tripy-error`.
 *
 * Node matching rule (the Python side must follow it):
 *   A graph node `<g class="node">` belongs to trace op X when its `id`
 *   attribute is `op-X` (X verbatim, `%` kept, no sanitising); failing that,
 *   when its `<title>` text is X.  Give each op node the DOT attribute
 *   `id="op-X"`, e.g.  `"t5" [id="op-%t5", label="%t5 = add(a, b)"]`.
 *   (Graphviz copies `id` onto the `<g>`; it writes the node name into
 *   `<title>`, but treats names starting with `%` as anonymous and renames
 *   them, so `<title>` alone cannot carry `%t5`.)  The renderer then drops the
 *   `id` (several views may share a page) and sets `data-op-id`.  Nodes that
 *   match no op (inputs, constants) are drawn but not clickable.
 *
 * Markup: the graph's SVG is the only markup a bundle carries; it is inserted
 * only through `sanitizeSvg` (sanitize.ts, DOMPurify).  Everything else is
 * text.  So the renderer is `safe` and also draws untrusted outputs.
 *
 * Layout: the panes sit side by side with drag handles between them
 * (`.tripy-splitter`), and stack when the output is narrower than 900px; each
 * pane body can be resized in height.  The graph pane has Fit / - / + / 1:1
 * (`[data-tripy-zoom]` holds the scale); the MLIR pane wraps long lines
 * (toggle "wrap").
 *
 * Stable DOM (used by tests and by the lab's stage tabs):
 *   [data-tripy-pane="graph"|"mlir"|"layers"]  the three panes
 *   g.node[data-op-id]                          matched graph nodes
 *   .tripy-mlir-line[data-op-id][data-line]     MLIR lines (data-op-id only when the line has an op)
 *   .tripy-mlir-region[data-module]             a module's MLIR lines, nested (bundle.folds), .tripy-folded when shut
 *   tr.tripy-layer-row[data-layer-id][data-op-id]  layer rows; data-op-id is a
 *                                               space-separated list (match with [data-op-id~="%t5"])
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { dotText, sanitizeSvg } from './sanitize';
import { FoldedGraph, graphRendererFactory, IGraphBundle } from './graph';
import { button, drawDot, el, GraphZoom } from './zoom';

export { GraphZoom };

export const MIME_TYPE = 'application/vnd.tripy-lab.crosswalk+json';

const SELECTED = 'tripy-selected';
const COLUMNS = ['layer', 'kind', 'ops', 'source', 'shapes', 'dtypes', 'kernel'];
const ERROR = 'tripy-error';

interface IOp {
  id: string;
  label?: string;
  line?: string | null;
  mlir?: number[];
  layers?: string[];
}

interface IMlirLine {
  line: number;
  text: string;
  op: string | null;
}

interface ILayer {
  id: string;
  name?: string;
  kind?: string;
  ops?: string[];
  lines?: string[];
  shapes?: string;
  dtypes?: string;
  kernel?: string;
}

interface IBundle {
  version: number;
  title?: string;
  svg?: string | null;
  dot?: string;
  ops?: IOp[];
  mlir?: IMlirLine[];
  layers?: ILayer[];
  error?: { message: string; op?: string | null } | null;
  graph?: IGraphBundle | null; // the folded graph: drawn instead of svg/dot when present
  folds?: IMlirFold[]; // the MLIR's folds per module (0-based line ranges into mlir, nested)
}

interface IMlirFold {
  name: string;
  start: number;
  end: number;
  ops: number;
  children?: IMlirFold[];
}


export class CrosswalkWidget extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('tripy-crosswalk');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const bundle = model.data[this._mimeType] as unknown as IBundle;
    this.node.textContent = '';
    this._items.clear();
    this._selected = null;
    if (!bundle || bundle.version !== 1) {
      this.node.appendChild(
        el('div', 'tripy-crosswalk-message', `tripy-lab: unsupported crosswalk bundle version ${bundle?.version}`)
      );
      return;
    }
    this._bundle = bundle;
    this._opsById = new Map((bundle.ops ?? []).map(op => [op.id, op]));

    this.node.appendChild(el('div', 'tripy-crosswalk-title', bundle.title ?? ''));
    if (bundle.error) {
      this.node.appendChild(el('div', 'tripy-crosswalk-errormsg', bundle.error.message));
    }
    const panes = el('div', 'tripy-crosswalk-panes');
    const graph = this._pane('graph', 'Trace graph');
    const mlir = this._pane('mlir', 'MLIR');
    const layers = this._pane('layers', 'Engine layers');
    panes.append(graph, splitter(), mlir, splitter(), layers);
    this._mlirTools(mlir);
    this._status = el('div', 'tripy-crosswalk-status', 'Click a node, an MLIR line or a layer.');
    this.node.append(panes, this._status);

    this._renderMlir(mlir, bundle.mlir ?? []);
    this._renderLayers(layers, bundle.layers ?? []);
    await this._renderGraph(graph, bundle);
    this._markError();
  }

  private _pane(name: string, heading: string): HTMLDivElement {
    const pane = el('div', 'tripy-pane');
    pane.dataset.tripyPane = name;
    pane.appendChild(el('div', 'tripy-pane-heading', heading));
    const body = el('div', 'tripy-pane-body');
    pane.appendChild(body);
    return pane;
  }

  private async _renderGraph(pane: HTMLElement, bundle: IBundle): Promise<void> {
    const body = pane.querySelector('.tripy-pane-body') as HTMLElement;
    if (bundle.graph) {
      // the folded graph: selecting a group selects its ops' MLIR lines and layers
      this._folded = new FoldedGraph(bundle.graph, {
        onSelect: ops => this._select(ops.length ? ops : null, false)
      });
      pane.dataset.tripyRenderer = 'folded';
      body.appendChild(this._folded.node);
      await this._folded.draw();
      return;
    }
    let text = bundle.svg ?? null;
    if (!text) {
      if (!bundle.dot) {
        body.appendChild(el('div', 'tripy-crosswalk-message', 'No graph.'));
        return;
      }
      const wait = el('div', 'tripy-crosswalk-message', 'Drawing graph…');
      body.appendChild(wait);
      try {
        const drawing = await drawDot(bundle.dot);
        text = drawing.svg;
        if (drawing.fallback) {
          body.appendChild(el('div', 'tripy-crosswalk-message', `Laid out with ${drawing.fallback}.`));
        }
      } catch (err) {
        wait.textContent = `Could not draw the graph: ${err}`;
        return;
      }
      wait.remove();
      pane.dataset.tripyRenderer = 'wasm';
    } else {
      pane.dataset.tripyRenderer = 'dot';
    }
    const clean = sanitizeSvg(text);
    if (!clean) {
      body.appendChild(el('div', 'tripy-crosswalk-message', 'The graph is not valid SVG.'));
      return;
    }
    const { svg, nodeIds } = clean;
    body.appendChild(svg);
    // graphviz draws ids with unprintable characters replaced (dotText): match on the same form
    const byDrawnId = new Map([...this._opsById.keys()].map(id => [dotText(id), id]));
    svg.querySelectorAll('g.node').forEach(node => {
      const drawn = nodeIds.get(node) ?? '';
      const byTitle = node.querySelector('title')?.textContent?.trim() ?? '';
      const id = byDrawnId.get(drawn) ?? (this._opsById.has(byTitle) ? byTitle : undefined);
      if (id !== undefined) {
        node.setAttribute('data-op-id', id);
        this._register(node, [id]);
      }
    });
    this._zoom = new GraphZoom(pane, pane.querySelector('.tripy-pane-heading') as HTMLElement, body);
    this._zoom.attach(svg);
  }

  private _mlirTools(pane: HTMLElement): void {
    const wrap = button('wrap', 'Wrap long MLIR lines');
    wrap.setAttribute('aria-pressed', 'true');
    pane.classList.add('tripy-wrap');
    wrap.addEventListener('click', () => {
      const on = pane.classList.toggle('tripy-wrap');
      wrap.setAttribute('aria-pressed', String(on));
    });
    pane.querySelector('.tripy-pane-heading')?.appendChild(wrap);
  }

  private _renderMlir(pane: HTMLElement, lines: IMlirLine[]): void {
    const body = pane.querySelector('.tripy-pane-body') as HTMLElement;
    const code = el('div', 'tripy-mlir');
    // ops[].mlir holds 0-based indices into bundle.mlir: invert once (not per line: 3,000 lines x 2,750 ops)
    const byLine = new Map<number, string[]>();
    for (const op of this._opsById.values()) {
      for (const index of op.mlir ?? []) {
        byLine.set(index, [...(byLine.get(index) ?? []), op.id]);
      }
    }
    const rows = lines.map((line, index) => {
      const row = el('div', 'tripy-mlir-line');
      row.dataset.line = String(line.line ?? index + 1);
      row.append(el('span', 'tripy-lineno', String(line.line ?? index + 1)), el('span', 'tripy-code', line.text));
      const ops = new Set<string>(byLine.get(index) ?? []);
      if (line.op) {
        ops.add(line.op);
      }
      if (ops.size) {
        row.dataset.opId = [...ops].join(' ');
        row.title = [...ops].map(id => this._opsById.get(id)?.label ?? id).join('\n');
        this._register(row, [...ops]);
      }
      return row;
    });
    // foldable regions per module, nested: the kernel's folds (lab/views/mlir_folds.py, as the MLIR tab)
    const place = (parent: HTMLElement, folds: IMlirFold[], start: number, end: number): void => {
      let i = start;
      for (const fold of folds) {
        for (; i < Math.min(fold.start, rows.length); i++) {
          parent.appendChild(rows[i]);
        }
        const box = this._mlirRegion(fold);
        parent.appendChild(box);
        place(box, fold.children ?? [], fold.start, Math.min(fold.end, rows.length));
        i = Math.max(i, fold.end);
      }
      for (; i < end; i++) {
        parent.appendChild(rows[i]);
      }
    };
    place(code, this._bundle?.folds ?? [], 0, rows.length);
    body.appendChild(code);
  }

  private _mlirRegion(fold: IMlirFold): HTMLElement {
    const box = el('div', 'tripy-mlir-region');
    box.dataset.module = fold.name;
    const text = `${fold.name}  (${fold.ops} ops, lines ${fold.start + 1}–${fold.end})`;
    const head = el('div', 'tripy-mlir-region-head', `▾ ${text}`);
    head.title = 'Fold or unfold the MLIR of this module';
    head.addEventListener('click', () => {
      const folded = box.classList.toggle('tripy-folded');
      head.textContent = `${folded ? '▸' : '▾'} ${text}`;
    });
    box.appendChild(head);
    return box;
  }

  private _renderLayers(pane: HTMLElement, layers: ILayer[]): void {
    const body = pane.querySelector('.tripy-pane-body') as HTMLElement;
    if (!layers.length) {
      body.appendChild(el('div', 'tripy-crosswalk-message', 'No engine layers (not built yet).'));
      return;
    }
    const table = el('table', 'tripy-layers');
    const head = el('tr');
    for (const name of COLUMNS) {
      head.appendChild(el('th', undefined, name));
    }
    table.createTHead().appendChild(head);
    const tbody = table.createTBody();
    for (const layer of layers) {
      const ops = new Set(layer.ops ?? []);
      for (const op of this._opsById.values()) {
        if (op.layers?.includes(layer.id)) {
          ops.add(op.id);
        }
      }
      const row = el('tr', 'tripy-layer-row');
      row.dataset.layerId = layer.id;
      row.dataset.opId = [...ops].join(' ');
      const cells = [
        layer.name ?? layer.id,
        layer.kind ?? '',
        [...ops].join(', '),
        (layer.lines ?? []).join(', '),
        layer.shapes ?? '',
        layer.dtypes ?? '',
        layer.kernel ?? ''
      ];
      cells.forEach((text, i) => row.appendChild(el('td', `tripy-col-${COLUMNS[i]}`, text)));
      this._register(row, [...ops]);
      tbody.appendChild(row);
    }
    body.appendChild(table);
  }

  /** Remember which ops `node` shows and make it a click target. */
  private _register(node: Element, ops: string[]): void {
    for (const id of ops) {
      const list = this._items.get(id) ?? [];
      list.push(node);
      this._items.set(id, list);
    }
    node.classList.add('tripy-clickable');
    node.addEventListener('click', event => {
      event.stopPropagation();
      const key = ops.join(' ');
      this._select(this._selected === key ? null : ops);
    });
  }

  private _select(ops: string[] | null, syncGraph = true): void {
    if (syncGraph && this._folded) {
      this._folded.showOps(ops ?? []);
    }
    const graph = this.node.querySelector('[data-tripy-pane="graph"]');
    this.node.querySelectorAll(`.${SELECTED}`).forEach(n => {
      if (!(this._folded && graph?.contains(n))) {
        n.classList.remove(SELECTED);
      }
    });
    this._selected = ops ? ops.join(' ') : null;
    if (!ops) {
      this._status.textContent = 'Selection cleared.';
      return;
    }
    for (const id of ops) {
      for (const node of this._items.get(id) ?? []) {
        node.classList.add(SELECTED);
        for (let r = node.closest('.tripy-mlir-region'); r; r = r.parentElement?.closest('.tripy-mlir-region') ?? null) {
          r.classList.remove('tripy-folded'); // every fold around a selected line opens
        }
      }
    }
    const more = ops.length > 6 ? `  |  … and ${ops.length - 6} more ops` : '';
    this._status.textContent = ops
      .slice(0, 6)
      .map(id => {
        const op = this._opsById.get(id);
        return op ? `${op.label ?? id}${op.line ? `   @ ${op.line}` : ''}` : id;
      })
      .join('  |  ') + more;
    for (const pane of ['mlir', 'layers']) {
      const body = this.node.querySelector(`[data-tripy-pane="${pane}"] .tripy-pane-body`);
      const first = body?.querySelector(`.${SELECTED}`) as HTMLElement | null;
      if (body && first) {
        scrollWithin(body as HTMLElement, first);
      }
    }
  }

  private _markError(): void {
    const id = this._bundle?.error?.op;
    if (!id) {
      return;
    }
    for (const node of this._items.get(id) ?? []) {
      node.classList.add(ERROR);
    }
  }

  private _mimeType: string;
  private _bundle: IBundle | null = null;
  private _opsById = new Map<string, IOp>();
  private _items = new Map<string, Element[]>();
  private _selected: string | null = null;
  private _status: HTMLElement = el('div');
  private _zoom: GraphZoom | null = null;
  private _folded: FoldedGraph | null = null;

  /** The graph's zoom controller (tests and the lab read `scale`). */
  get zoom(): GraphZoom | null {
    return this._zoom;
  }
}

/** A drag handle between two panes: moves the boundary (flex-basis of both neighbours). */
function splitter(): HTMLDivElement {
  const bar = el('div', 'tripy-splitter');
  bar.title = 'Drag to resize the panes';
  bar.addEventListener('pointerdown', event => {
    const left = bar.previousElementSibling as HTMLElement | null;
    const right = bar.nextElementSibling as HTMLElement | null;
    if (!left || !right) {
      return;
    }
    event.preventDefault();
    bar.setPointerCapture(event.pointerId);
    const x0 = event.clientX;
    const l0 = left.getBoundingClientRect().width;
    const r0 = right.getBoundingClientRect().width;
    const move = (e: PointerEvent) => {
      const dx = Math.max(80 - l0, Math.min(r0 - 80, e.clientX - x0));
      left.style.flex = `0 0 ${l0 + dx}px`;
      right.style.flex = `0 0 ${r0 - dx}px`;
    };
    const up = () => {
      bar.removeEventListener('pointermove', move);
      bar.removeEventListener('pointerup', up);
    };
    bar.addEventListener('pointermove', move);
    bar.addEventListener('pointerup', up);
  });
  return bar;
}

/** Scroll `body` (not the page) so that `item` is visible. */
function scrollWithin(body: HTMLElement, item: HTMLElement): void {
  const top = item.getBoundingClientRect().top - body.getBoundingClientRect().top + body.scrollTop;
  if (top < body.scrollTop || top + item.offsetHeight > body.scrollTop + body.clientHeight) {
    body.scrollTop = Math.max(0, top - body.clientHeight / 3);
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  // Safe: the only markup is the graph's SVG, inserted through sanitizeSvg (DOMPurify).
  safe: true,
  mimeTypes: [MIME_TYPE],
  createRenderer: options => new CrosswalkWidget(options)
};

const extensions: IRenderMime.IExtension[] = [
  { id: 'tripy-lab:crosswalk', rendererFactory, rank: 0, dataType: 'json' },
  { id: 'tripy-lab:graph', rendererFactory: graphRendererFactory, rank: 0, dataType: 'json' }
];

export default extensions;
