/**
 * The one place where markup from a bundle enters the page.
 *
 * Everything else the renderer shows is text (`textContent`).  Markup (the
 * graph's SVG, from the kernel's graphviz or from the wasm build of it) goes
 * through DOMPurify with its SVG profile and these extra rules:
 *   - no <style>, <script>, <foreignObject> (a bundle must not restyle or script
 *     the JupyterLab page; foreignObject would smuggle HTML into the SVG);
 *   - no `style` attributes and no event handlers (DOMPurify drops `on*`);
 *   - no links at all (`href`, `xlink:href`, `src` are dropped): no javascript:,
 *     data: or remote URLs, so a click on a node can only select it;
 *   - no `id` survives: ids are read once (node ids name trace ops) and then
 *     removed, so a bundle cannot clobber page globals or duplicate ids.
 */
import DOMPurify from 'dompurify';

// Our own instance: the hook below must not change how anyone else's DOMPurify behaves.
const purify = DOMPurify(window);
// Values read from attributes DOMPurify is about to drop: it removes any attribute whose value looks like
// markup (mXSS protection for HTML that is serialized and parsed again; we keep DOM nodes, never strings).
// Op ids and tooltips are names and may look like anything: keep the op id aside, and keep the tooltip
// (xlink:title is shown as plain text by the browser, never parsed or followed).
const opIds = new WeakMap<Element, string>();
const groupIds = new WeakMap<Element, string>(); // every <g>'s id (nodes, clusters, edges of the folded graph)
purify.addHook('uponSanitizeAttribute', (node, data) => {
  const raw = data.attrName === 'id' ? (node as Element).getAttribute('id') ?? '' : ''; // not trimmed
  if (raw && node.nodeName.toLowerCase() === 'g') {
    groupIds.set(node as Element, raw);
  }
  if (raw.startsWith('op-') && node.nodeName.toLowerCase() === 'g') {
    opIds.set(node as Element, raw.slice(3));
  } else if (data.attrName === 'xlink:title') {
    data.forceKeepAttr = true;
  }
});

const SVG_CONFIG = {
  USE_PROFILES: { svg: true, svgFilters: true },
  FORBID_TAGS: ['style', 'script', 'foreignObject', 'iframe', 'image', 'use', 'animate', 'set'],
  FORBID_ATTR: ['style', 'href', 'xlink:href', 'src', 'action', 'formaction'],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true
};

/** Characters graphviz cannot put in an SVG (tripy_lab.trace.graph.dot_text does the same). */
export function dotText(text: string): string {
  return text
    .replace(/[\x00-\x09\x0b-\x1f]/g, c => String.fromCharCode(0x2400 + c.charCodeAt(0)))
    .replace(/\x7f/g, '\u2421')
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]|[\ufffe\uffff]/g, '\ufffd');
}

/**
 * A sanitized <svg> element (already in this document), the op id of each node that had
 * `id="op-X"`, and the id every <g> had (`ids`), or null when the text holds no <svg>.
 */
export function sanitizeSvg(
  text: string
): { svg: SVGSVGElement; nodeIds: Map<Element, string>; ids: Map<Element, string> } | null {
  const fragment = purify.sanitize(text, SVG_CONFIG) as unknown as DocumentFragment;
  const svg = fragment.querySelector('svg');
  if (!svg) {
    return null;
  }
  const nodeIds = new Map<Element, string>();
  svg.querySelectorAll('g.node').forEach(node => {
    const id = opIds.get(node);
    if (id !== undefined) {
      nodeIds.set(node, id);
    }
  });
  const ids = new Map<Element, string>();
  svg.querySelectorAll('g').forEach(node => {
    const id = groupIds.get(node);
    if (id !== undefined) {
      ids.set(node, id);
    }
  });
  svg.querySelectorAll('[id]').forEach(node => node.removeAttribute('id'));
  return { svg, nodeIds, ids };
}
