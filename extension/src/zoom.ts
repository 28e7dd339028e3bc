/** Shared by the crosswalk and the folded trace graph: DOM helpers, graphviz (wasm), zoom. */

type GraphvizModule = typeof import('@hpcc-js/wasm-graphviz');
let graphviz: Promise<GraphvizModule> | null = null;

/** A DOT drawing: the SVG text, and the layout engine when it is not ``dot`` (with why). */
export interface IDrawing {
  svg: string;
  fallback?: string;
}

/**
 * Draw DOT text with the wasm build of Graphviz (loaded once, on first use).
 *
 * Its ``dot`` layout crashes on some graphs ("table index is out of bounds", depending on the exact
 * strings, not on the spacing: hpcc-js-wasm issue 389), and a crash leaves the instance unusable for every
 * later drawing. So a failed layout unloads the instance, is tried once more on a fresh one, and then drawn
 * with ``fdp`` (no ranks; every node, id and cluster kept) rather than not at all.
 */
export async function drawDot(dot: string): Promise<IDrawing> {
  if (graphviz === null) {
    graphviz = import('@hpcc-js/wasm-graphviz');
  }
  const { Graphviz } = await graphviz;
  let first: unknown = null;
  for (const engine of ['dot', 'dot', 'fdp'] as const) {
    try {
      const svg = (await Graphviz.load()).layout(dot, 'svg', engine);
      // a retried dot layout that works is the drawing asked for: only fdp is worth a note
      return engine === 'dot' ? { svg } : { svg, fallback: `${engine} (the dot layout failed: ${first})` };
    } catch (err) {
      first = first ?? err;
      Graphviz.unload(); // the next load() starts a fresh instance
    }
  }
  throw first;
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export function button(text: string, title: string): HTMLButtonElement {
  const b = el('button', 'tripy-tool', text);
  b.type = 'button';
  b.title = title;
  return b;
}

/** Fit / zoom of the graph's SVG: sets its width and height from the viewBox times `scale`. */
export class GraphZoom {
  /** `fitHeight`: the body is as tall as the drawing when that is shorter than its stylesheet height (a five-op
   * graph in a 70vh box was mostly empty); off for panes that sit in a row and share one height. */
  constructor(pane: HTMLElement, toolsHost: HTMLElement, body: HTMLElement, fitHeight = false) {
    this._pane = pane;
    this._body = body;
    this._fitHeight = fitHeight;
    const tools = el('span', 'tripy-tools');
    const add = (text: string, title: string, action: () => void) => {
      const b = button(text, title);
      b.dataset.tripyZoomAction = text;
      b.addEventListener('click', event => {
        event.stopPropagation();
        action();
      });
      tools.appendChild(b);
    };
    add('Fit', 'Fit the whole graph in the pane', () => this.fit());
    add('−', 'Zoom out', () => this.set(this.scale / 1.25));
    add('+', 'Zoom in', () => this.set(this.scale * 1.25));
    add('1:1', 'Actual size', () => this.set(1));
    toolsHost.appendChild(tools);
    body.addEventListener(
      'wheel',
      event => {
        if (event.ctrlKey || event.metaKey) {
          event.preventDefault();
          this.set(this.scale * (event.deltaY < 0 ? 1.1 : 1 / 1.1));
        }
      },
      { passive: false }
    );
  }

  /** Show `svg` (a new drawing): the first keeps a readable default scale, later ones keep the user's. */
  attach(svg: SVGSVGElement): void {
    const first = this._svg === null;
    this._svg = svg;
    const box = svg.viewBox?.baseVal;
    this._w = box && box.width ? box.width : svg.getBBox?.().width || 100;
    this._h = box && box.height ? box.height : svg.getBBox?.().height || 100;
    svg.removeAttribute('width');
    svg.removeAttribute('height');
    if (first) {
      // readable by default: actual size, or the pane's width when the graph is wider, but never below
      // 60% (text stays legible; the pane scrolls and Fit shows all of it)
      this.set(1);
      requestAnimationFrame(() => this.set(Math.max(0.6, Math.min(1, this._fitWidth()))));
    } else {
      this.set(this._scale);
    }
  }

  /** With `fitHeight`: the stylesheet's height, or the drawing's when that is less (the CSS min-height still
   * holds); a later, taller drawing gets the stylesheet's height back. A height the user dragged stays. */
  private _shrinkToDrawing(): void {
    const body = this._body;
    if (!this._fitHeight || !this._svg || (body.style.height && body.style.height !== this._autoHeight)) {
      return;
    }
    if (body.offsetHeight === 0) {
      // drawn in a hidden tab (the Error tab opens first): measure once the body is shown
      if (this._whenShown === null) {
        this._whenShown = new ResizeObserver(() => {
          if (body.offsetHeight > 0) {
            this._whenShown?.disconnect();
            this._whenShown = null;
            this._shrinkToDrawing();
          }
        });
        this._whenShown.observe(body);
      }
      return;
    }
    body.style.height = '';
    this._autoHeight = '';
    const style = getComputedStyle(body);
    const pad = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom) || 0;
    const border = parseFloat(style.borderTopWidth) + parseFloat(style.borderBottomWidth) || 0;
    const scrollbar = body.scrollWidth > body.clientWidth ? body.offsetHeight - body.clientHeight - border : 0;
    const need = Math.ceil(this._svg.getBoundingClientRect().height + pad + border + scrollbar + 4);
    if (need < body.offsetHeight) {
      this._autoHeight = `${need}px`;
      body.style.height = this._autoHeight;
    }
  }

  get scale(): number {
    return this._scale;
  }

  set(scale: number): void {
    this._scale = Math.min(8, Math.max(0.05, scale));
    if (!this._svg) {
      return;
    }
    this._svg.setAttribute('width', `${this._w * this._scale}pt`);
    this._svg.setAttribute('height', `${this._h * this._scale}pt`);
    this._pane.dataset.tripyZoom = this._scale.toFixed(3);
    this._shrinkToDrawing(); // zoomed in, a shrunk box grows with the drawing (up to the stylesheet's height)
  }

  fit(): void {
    const h = (this._body.clientHeight - 8) / ((this._h * 4) / 3);
    this.set(Math.min(this._fitWidth(), h > 0 ? h : Infinity));
  }

  private _fitWidth(): number {
    const w = (this._body.clientWidth - 8) / ((this._w * 4) / 3); // viewBox units are pt (4/3 px)
    return w > 0 ? w : 1;
  }

  private _pane: HTMLElement;
  private _body: HTMLElement;
  private _svg: SVGSVGElement | null = null;
  private _w = 100;
  private _h = 100;
  private _scale = 1;
  private _fitHeight: boolean;
  private _whenShown: ResizeObserver | null = null;
  private _autoHeight = ''; // the height _shrinkToDrawing set ('' none), to tell it from one the user dragged
}

