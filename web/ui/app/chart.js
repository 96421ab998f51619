// A time-series chart (uPlot): x in epoch seconds, one or more named series, sized to its container.
import { html } from 'htm/preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

const COLORS = ['#2a7ae2', '#e2612a', '#2aa876', '#a83aa8'];

export function Chart({ title, times, series, format = (v) => String(v), axisFormat = format }) {
  const box = useRef(null);
  const plot = useRef(null);
  const data = [times, ...series.map((s) => s.values)];

  useEffect(() => {
    const el = box.current;
    const opts = {
      width: Math.max(200, el.clientWidth),
      height: 180,
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: COLORS[i % COLORS.length],
          width: 1.5,
          value: (_u, v) => (v === null ? '–' : format(v)),
        })),
      ],
      axes: [{}, { values: (_u, ticks) => ticks.map(axisFormat), size: 80 }],
      scales: { x: { time: true } },
      legend: { live: true },
    };
    plot.current = new uPlot(opts, data, el);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height: 180 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [series.length]);

  useEffect(() => {
    plot.current?.setData(data);
  });

  return html`<figure class="chart">
    <figcaption>${title}</figcaption>
    <div ref=${box}></div>
  </figure>`;
}
