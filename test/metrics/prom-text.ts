// A strict parser of the Prometheus text format (version 0.0.4,
// https://prometheus.io/docs/instrumenting/exposition_formats/): every line
// is a `# HELP`, a `# TYPE`, another comment, or a sample; anything else
// throws. Enough for the tests to read /metrics as Prometheus would.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`);
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const family = (name: string) => {
    let f = families.get(name);
    if (!f) families.set(name, (f = { name, type: 'untyped', help: '', samples: [] }));
    return f;
  };
  /** The family a sample belongs to: histograms' _bucket, _sum and _count are their family's. */
  const owner = (name: string) => {
    const base = name.replace(/_(bucket|sum|count)$/, '');
    const f = families.get(base);
    return f && (f.type === 'histogram' || f.type === 'summary') ? f : family(name);
  };
  if (text !== '' && !text.endsWith('\n')) throw new Error('the text must end with a newline');
  for (const [i, line] of text.split('\n').entries()) {
    if (line === '') continue;
    const where = `line ${i + 1}: ${JSON.stringify(line)}`;
    if (line.startsWith('#')) {
      const m = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(line);
      if (!m) continue; // another comment
      const f = family(m[2] as string);
      if (m[1] === 'HELP') f.help = m[3] as string;
      else {
        if (!TYPES.has(m[3] as string)) throw new Error(`unknown type at ${where}`);
        if (f.samples.length > 0) throw new Error(`TYPE after samples at ${where}`);
        f.type = m[3] as string;
      }
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample at ${where}`);
    const labels: Record<string, string> = {};
    let rest = m[2] ?? '';
    while (rest !== '') {
      const l = LABEL.exec(rest);
      if (!l) throw new Error(`bad labels at ${where}`);
      const name = l[1] as string;
      if (name in labels) throw new Error(`label ${name} twice at ${where}`);
      labels[name] = (l[2] as string).replace(/\\(["\\n])/g, (_, c: string) =>
        c === 'n' ? '\n' : c,
      );
      rest = rest.slice(l[0].length);
    }
    const raw = m[3] as string;
    const value =
      raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : raw === 'NaN' ? NaN : Number(raw);
    if (Number.isNaN(value) && raw !== 'NaN') throw new Error(`bad value at ${where}`);
    owner(m[1] as string).samples.push({ name: m[1] as string, labels, value });
  }
  return families;
}
