// Benchmark command lines: --name=value or --name value, and bare --flag for booleans.
export interface Args {
  str(name: string, dflt: string): string;
  int(name: string, dflt: number): number;
  /** Comma list of whole numbers, e.g. --n=100,500. */
  ints(name: string, dflt: number[]): number[];
  flag(name: string): boolean;
}

export function parseArgs(argv: string[]): Args {
  const values = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument "${a}" (options look like --name=value)`);
    const eq = a.indexOf('=');
    if (eq > 0) values.set(a.slice(2, eq), a.slice(eq + 1));
    else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) values.set(a.slice(2), argv[++i]);
    else values.set(a.slice(2), 'true');
  }
  const int = (name: string, v: string) => {
    if (!/^\d+$/.test(v)) throw new Error(`--${name}: "${v}" is not a whole number`);
    return Number(v);
  };
  return {
    str: (name, dflt) => values.get(name) ?? dflt,
    int: (name, dflt) => (values.has(name) ? int(name, values.get(name)!) : dflt),
    ints: (name, dflt) =>
      values.has(name)
        ? values
            .get(name)!
            .split(',')
            .map((v) => int(name, v.trim()))
        : dflt,
    flag: (name) => ['true', '1', 'yes', 'on'].includes(values.get(name) ?? ''),
  };
}
