export type Align = 'left' | 'right';

export interface Column<Row> {
  header: string;
  align?: Align;
  value(row: Row): string;
}

/** A GitHub-flavoured markdown table, padded so it also reads well in a terminal. */
export function markdownTable<Row>(columns: ReadonlyArray<Column<Row>>, rows: readonly Row[]): string {
  const cells = rows.map((row) => columns.map((column) => escapeCell(column.value(row))));
  const widths = columns.map((column, i) => Math.max(3, column.header.length, ...cells.map((line) => (line[i] ?? '').length)));
  const pad = (text: string, i: number) => {
    const width = widths[i] ?? 3;
    return columns[i]?.align === 'right' ? text.padStart(width) : text.padEnd(width);
  };
  const line = (values: readonly string[]) => `| ${values.map((v, i) => pad(v, i)).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (columns[i]?.align === 'right' ? `${'-'.repeat(w + 1)}:` : `${'-'.repeat(w + 2)}`)).join('|')}|`;
  return [line(columns.map((c) => c.header)), rule, ...cells.map(line)].join('\n');
}

function escapeCell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** A number with a fixed count of significant-looking decimals: 12.3, 1,234, 45,678. */
export function formatNumber(value: number, decimals = 0): string {
  if (!Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

/** Microseconds: one decimal below 100 µs, whole numbers above. */
export function formatMicros(us: number): string {
  return formatNumber(us, us < 100 ? 1 : 0);
}

export function formatRatio(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : '–';
}
