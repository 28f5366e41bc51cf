// Benchmark command lines: --name=value or --name value, and bare --flag for booleans. --help (or -h) prints the
// script's opening comment, which is where each benchmark says what it measures and which options it takes.
import fs from 'node:fs';

export interface Args {
  str(name: string, dflt: string): string;
  int(name: string, dflt: number): number;
  /** Comma list of whole numbers, e.g. --n=100,500. */
  ints(name: string, dflt: number[]): number[];
  flag(name: string): boolean;
}

function printUsage(): void {
  const lines = fs.readFileSync(process.argv[1], 'utf8').split('\n');
  const end = lines.findIndex((l) => !l.startsWith('//'));
  process.stdout.write(
    `${lines
      .slice(0, end === -1 ? lines.length : end)
      .map((l) => l.replace(/^\/\/ ?/, ''))
      .join('\n')}\n`,
  );
}

export function parseArgs(argv: string[]): Args {
  if (argv.includes('--help') || argv.includes('-h')) {
    printUsage();
    process.exit(0);
  }
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
