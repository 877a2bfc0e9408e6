// The command table's shape and argument parsing: every command declares its options once, and
// its `--help`, its usage line in errors and the parser all come from that declaration.
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';

/** A failure to report as one line on stderr, exit code 1 (or `exitCode`). */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

export interface OptionSpec {
  type: 'string' | 'boolean';
  /** One line for --help; a value placeholder may lead it (`EMAIL: the owner's address`). */
  description: string;
  short?: string;
  multiple?: boolean;
}

export interface CommandSpec<Ctx> {
  /** `events list`: the words that select it. */
  name: string;
  usage: string;
  summary: string;
  options: Record<string, OptionSpec>;
  /** Positional arguments by name, in order (`--help` lists them). */
  positionals?: Array<{ name: string; description: string; optional?: boolean }>;
  /** A command that talks to the REST API: takes --api-key, --base-url, --json. */
  api: boolean;
  /** Extra text for --help (examples, what it prints). */
  details?: string;
  run(ctx: Ctx, args: Parsed): Promise<number | undefined>;
}

export interface Parsed {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

/** Options every REST command accepts. */
export const API_OPTIONS: Record<string, OptionSpec> = {
  'api-key': {
    type: 'string',
    description: 'KEY: the API key (else MCS_API_KEY, else the one `mcs login` saved)',
  },
  'base-url': {
    type: 'string',
    description:
      'URL: the API (else MCS_BASE_URL, else the saved one, else http://127.0.0.1:$PORT, 8080 without PORT)',
  },
  json: { type: 'boolean', description: 'print JSON for scripts instead of tables' },
};

export function optionsOf<Ctx>(spec: CommandSpec<Ctx>): Record<string, OptionSpec> {
  return spec.api ? { ...spec.options, ...API_OPTIONS } : spec.options;
}

export function parse<Ctx>(spec: CommandSpec<Ctx>, args: string[]): Parsed {
  const options: ParseArgsOptionsConfig = {};
  for (const [name, o] of Object.entries(optionsOf(spec))) {
    options[name] = {
      type: o.type,
      ...(o.short ? { short: o.short } : {}),
      ...(o.multiple ? { multiple: true } : {}),
    };
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals: true });
  } catch (err) {
    // Node's messages run on with advice about '--' (over several lines); the first sentence says
    // what is wrong. A value that starts with a dash is taken for an option: say how to give it.
    const message = (err as Error).message;
    const first = message.split(/(?<=\.)\s/)[0]?.replace(/\.$/, '') ?? 'bad arguments';
    const dashed = /use '(--[^']+)'/.exec(message)?.[1];
    throw usageError(dashed ? `${first}: give a value that starts with a dash as ${dashed}` : first, spec);
  }
  const max = spec.positionals?.length ?? 0;
  if (parsed.positionals.length > max) {
    const extra = parsed.positionals[max];
    throw usageError(`unexpected argument "${extra}"`, spec);
  }
  for (const [i, p] of (spec.positionals ?? []).entries()) {
    if (!p.optional && parsed.positionals[i] === undefined) throw usageError(`missing ${p.name}`, spec);
  }
  return { values: parsed.values as Parsed['values'], positionals: parsed.positionals };
}

export function usageError<Ctx>(problem: string, spec?: CommandSpec<Ctx>): CliError {
  const usage = spec ? `${spec.usage} (mcs ${spec.name} --help)` : 'mcs --help';
  return new CliError(`${problem}. Usage: ${usage}`);
}

export function str(p: Parsed, name: string): string | undefined {
  const v = p.values[name];
  return typeof v === 'string' ? v : undefined;
}

export function flag(p: Parsed, name: string): boolean {
  return p.values[name] === true;
}

export function required<Ctx>(p: Parsed, name: string, spec: CommandSpec<Ctx>): string {
  const v = str(p, name);
  if (v === undefined || v === '') throw usageError(`missing --${name}`, spec);
  return v;
}

/** `--limit`: a whole number in [1, 100] (the API's list limit). */
export function limitOf<Ctx>(p: Parsed, spec: CommandSpec<Ctx>): number | undefined {
  const text = str(p, 'limit');
  if (text === undefined) return undefined;
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(n >= 1 && n <= 100))
    throw usageError(`--limit must be a whole number from 1 to 100, not "${text}"`, spec);
  return n;
}

/** The --help text of one command. */
export function helpOf<Ctx>(spec: CommandSpec<Ctx>): string {
  const lines = [`usage: ${spec.usage}`, '', spec.summary];
  if (spec.positionals?.length) {
    lines.push('', 'arguments:');
    for (const p of spec.positionals) lines.push(`  ${p.name.padEnd(26)} ${p.description}`);
  }
  const opts = Object.entries(optionsOf(spec));
  if (opts.length > 0) {
    lines.push('', 'options:');
    for (const [name, o] of opts) {
      const [head, ...rest] = o.description.split(': ');
      const hasValue = o.type === 'string' && rest.length > 0;
      const label = `--${name}${hasValue ? ` ${head}` : ''}`;
      lines.push(`  ${label.padEnd(26)} ${hasValue ? rest.join(': ') : o.description}`);
    }
    lines.push(`  ${'--help'.padEnd(26)} this text`);
  }
  if (spec.details) lines.push('', spec.details.trimEnd());
  return `${lines.join('\n')}\n`;
}
