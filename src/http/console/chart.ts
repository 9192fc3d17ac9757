/**
 * A tiny inline SVG bar chart: one bar per value, scaled to the largest, with a text
 * alternative for screen readers. No script, no library.
 */
import { html, type Html } from './html.ts';

/** Bars for `values` (left to right), `label` describing them for assistive technology. */
export function barChart(values: readonly number[], label: string, { width = 600, height = 80 } = {}): Html {
  const max = Math.max(1, ...values);
  const step = width / Math.max(1, values.length);
  const bars = values.map((v, i) => {
    const h = v === 0 ? 0 : Math.max(1, Math.round((v / max) * (height - 2)));
    return html`<rect x="${(i * step + 0.5).toFixed(1)}" y="${height - h}" width="${Math.max(1, step - 1).toFixed(1)}" height="${h}"><title>${v}</title></rect>`;
  });
  return html`<svg class="chart" viewBox="0 0 ${width} ${height}" preserveAspectRatio="none" role="img" aria-label="${label}">${bars}</svg>`;
}
