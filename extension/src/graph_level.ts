/**
 * The folded graph's model in the browser and the DOT of one visible level (tripy_lab.lab.views.graph_draw.level_dot
 * builds the same DOT in the kernel for the static pictures).
 */
import { dotText } from './sanitize';

export const GRAPH_MIME = 'application/vnd.tripy-lab.graph+json';

export interface IGraphNode {
  i: string; // id (left out for an op: 'op-' and its label's name)
  l: string; // label
  k: string; // kind: op, const, input, output, module, call, run, failed
  p: number; // parent index, -1 at the top
  s: string; // user line (left out: its parent's)
  m: string; // module path (left out: its parent's)
  t: string; // tooltip ('' when left out)
  n: number; // ops under it (left out: 1 for an op, 0 for a group)
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

export function fmt(value: number, unit: string): string {
  return `${Number(value.toPrecision(3))} ${unit}`.trim();
}

/** The model with its derived tables: ancestors, leaves, the node of each id. */
export class GraphModel {
  constructor(readonly bundle: IGraphBundle) {
    this.nodes = bundle.nodes;
    // the kernel leaves out keys at their default (graph_model._node_json): fill them in once
    const inherit = (i: number, key: 'm' | 's'): string => {
      const n = this.nodes[i];
      if (n[key] === undefined) {
        n[key] = n.p >= 0 ? inherit(n.p, key) : '';
      }
      return n[key];
    };
    this.nodes.forEach((n, i) => {
      const leaf = n.k === 'op' || n.k === 'const';
      n.i ??= 'op-' + n.l.slice(0, n.l.indexOf(' = '));
      n.t ??= '';
      n.n ??= leaf ? 1 : 0;
      inherit(i, 'm');
      inherit(i, 's');
      this.byId.set(n.i, i);
    });
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

