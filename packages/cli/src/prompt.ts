// Asking for a secret on a terminal: what is typed is not echoed (so it stays out of the
// scrollback, screen shares and recordings), as for a password.
import { CliError } from './args.ts';

/** Reads one line from a terminal without echoing it. */
export async function askHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  stdin.setRawMode(true); // before the prompt: nothing typed after it is seen is echoed
  process.stderr.write(prompt);
  stdin.resume();
  try {
    let text = '';
    for await (const chunk of stdin) {
      for (const ch of (chunk as Buffer).toString('utf8')) {
        if (ch === '\r' || ch === '\n') return text;
        if (ch === '\u0003') throw new CliError('cancelled');
        if (ch === '\u007f' || ch === '\b') text = [...text].slice(0, -1).join('');
        else if (ch >= ' ') text += ch;
      }
    }
    return text;
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write('\n');
  }
}
