/**
 * Static-snapshot fallback for tripy-lab's live widget outputs.
 *
 * A `%%tpcompile` output is one bundle: the ipywidgets view
 * (`application/vnd.jupyter.widget-view+json`), a `text/html` snapshot whose
 * root carries `data-tripy-snapshot="1"` (tripy_lab/lab/views/snapshot.py), and text.
 * In a trusted notebook the widget renderer outranks text/html, so a notebook
 * reopened without the widget models shows "Loading widget..." or "model not
 * found" instead of the snapshot.  This plugin wraps the widget-view factory of
 * each notebook's rendermime: for bundles with our marker it shows the snapshot
 * (rendered by the rendermime's own text/html renderer, as untrusted, so it
 * goes through the rendermime sanitizer) until the inner ipywidgets renderer
 * has put a live view in its node; then the snapshot is hidden.  If the inner
 * renderer fails or never resolves, the snapshot stays.  Bundles without the
 * marker get the inner renderer alone, shown as is.
 *
 * ipywidgets' jupyterlab-manager adds its factory to a notebook's rendermime
 * asynchronously (once the kernel is ready) and sets the manager on the
 * renderers it finds by class, which our wrapper hides from it; so the wrapper
 * patches that rendermime's `addFactory`: a new widget factory is wrapped and
 * every wrapper on the panel rebuilds its inner renderer from it.  That makes
 * the plugin independent of activation order.
 *
 * Stable DOM: `.tripy-widget-fallback[data-tripy-live="0"|"1"]`, holding
 * `.tripy-widget-snapshot` and `.tripy-widget-live`.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Panel } from '@lumino/widgets';

const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
const MARKER = 'data-tripy-snapshot="1"'; // tripy_lab.lab.views.snapshot.MARKER
const WRAPPED = Symbol('tripy-widget-fallback');

/** The part of JupyterLab's IRenderMimeRegistry this module uses. */
interface IRenderMimeLike {
  getFactory(mimeType: string): IRenderMime.IRendererFactory | undefined;
  getRank(mimeType: string): number | undefined;
  addFactory(factory: IRenderMime.IRendererFactory, rank?: number): void;
  createRenderer(mimeType: string): IRenderMime.IRenderer;
}

type Wrapped = IRenderMime.IRendererFactory & { [WRAPPED]?: true };

/** Per rendermime: the current ipywidgets factory and the wrappers drawn with it. */
class PanelState {
  factory: IRenderMime.IRendererFactory;
  readonly wrappers = new Set<SnapshotFallback>();
  constructor(readonly rendermime: IRenderMimeLike, factory: IRenderMime.IRendererFactory) {
    this.factory = factory;
  }
}

export class SnapshotFallback extends Panel implements IRenderMime.IRenderer {
  private inner: IRenderMime.IRenderer | null = null;
  private snapshot: IRenderMime.IRenderer | null = null;
  private model: IRenderMime.IMimeModel | null = null;
  private observer: MutationObserver | null = null;

  constructor(
    private readonly state: PanelState,
    private readonly options: IRenderMime.IRendererOptions
  ) {
    super();
    this.addClass('tripy-widget-fallback');
    this.node.dataset.tripyLive = '0';
    state.wrappers.add(this);
    this.buildInner();
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.model = model;
    const html = model.data['text/html'];
    const source = Array.isArray(html) ? html.join('') : html;
    if (typeof source === 'string' && source.includes(MARKER)) {
      await this.renderSnapshot(source);
    } else {
      this.dropSnapshot();
    }
    this.update_();
    // The inner promise may never resolve (no kernel): do not wait for it.
    void this.inner!.renderModel(model).catch(err => console.error('tripy-lab: widget renderer failed', err));
  }

  /** Rebuild the inner renderer from a newer ipywidgets factory (one that has a widget manager). */
  rebuild(): void {
    this.buildInner();
    if (this.model) {
      void this.renderModel(this.model);
    }
  }

  dispose(): void {
    this.state.wrappers.delete(this);
    this.observer?.disconnect();
    super.dispose();
  }

  private buildInner(): void {
    this.observer?.disconnect();
    this.inner?.dispose();
    const inner = this.state.factory.createRenderer(this.options);
    inner.addClass('tripy-widget-live');
    this.inner = inner;
    this.addWidget(inner);
    // Live once the ipywidgets renderer has added its view: an element child (its messages are text only).
    this.observer = new MutationObserver(() => this.update_());
    this.observer.observe(inner.node, { childList: true });
    this.update_();
  }

  private async renderSnapshot(source: string): Promise<void> {
    if (!this.snapshot) {
      this.snapshot = this.state.rendermime.createRenderer('text/html');
      this.snapshot.addClass('tripy-widget-snapshot');
      this.insertWidget(0, this.snapshot);
    }
    // trusted: false -> the rendermime's sanitizer cleans the HTML (as in an untrusted notebook).
    const model: IRenderMime.IMimeModel = {
      trusted: false,
      data: { 'text/html': source },
      metadata: {},
      setData: () => undefined
    };
    await this.snapshot.renderModel(model);
  }

  private dropSnapshot(): void {
    this.snapshot?.dispose();
    this.snapshot = null;
  }

  private update_(): void {
    const live = this.inner !== null && this.inner.node.firstElementChild !== null;
    this.node.dataset.tripyLive = live ? '1' : '0';
    if (!this.snapshot) {
      this.inner?.show();
      return;
    }
    // Before the live view exists, the inner renderer shows only "Loading widget..." / errors: hide them.
    this.snapshot.setHidden(live);
    this.inner?.setHidden(!live);
  }
}

function wrapFactory(state: PanelState, factory: IRenderMime.IRendererFactory): Wrapped {
  const wrapped: Wrapped = {
    safe: factory.safe,
    mimeTypes: factory.mimeTypes,
    defaultRank: factory.defaultRank,
    createRenderer: options => new SnapshotFallback(state, options)
  };
  wrapped[WRAPPED] = true;
  return wrapped;
}

/** Wrap the widget-view factory of `rendermime` now and whenever one is added later. */
export function installFallback(rendermime: IRenderMimeLike): void {
  if ((rendermime as { [WRAPPED]?: true })[WRAPPED]) {
    return;
  }
  (rendermime as { [WRAPPED]?: true })[WRAPPED] = true;
  let state: PanelState | null = null;
  const addFactory = rendermime.addFactory.bind(rendermime);
  const adopt = (factory: IRenderMime.IRendererFactory, rank: number | undefined): void => {
    if (state) {
      state.factory = factory;
    } else {
      state = new PanelState(rendermime, factory);
    }
    addFactory(wrapFactory(state, factory), rank);
    for (const wrapper of Array.from(state.wrappers)) {
      wrapper.rebuild();
    }
  };
  rendermime.addFactory = (factory: IRenderMime.IRendererFactory, rank?: number) => {
    if (factory.mimeTypes.includes(WIDGET_MIME) && !(factory as Wrapped)[WRAPPED]) {
      adopt(factory, rank);
    } else {
      addFactory(factory, rank);
    }
  };
  const current = rendermime.getFactory(WIDGET_MIME);
  if (current && !(current as Wrapped)[WRAPPED]) {
    adopt(current, rendermime.getRank(WIDGET_MIME));
  }
}

/** The part of JupyterLab's application object this plugin uses. */
interface IAppLike {
  docRegistry: {
    addWidgetExtension(
      widgetName: string,
      extension: { createNew(panel: { content: { rendermime: IRenderMimeLike } }): void }
    ): unknown;
  };
}

const plugin = {
  id: 'tripy-lab:widget-snapshot-fallback',
  description: 'Shows the static snapshot of a tripy-lab widget output until its live view exists.',
  autoStart: true,
  activate: (app: IAppLike): void => {
    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: panel => installFallback(panel.content.rendermime)
    });
  }
};

export default plugin;
