import { baseEnvSchema, parseEnv, servicePort, serviceSocket } from '@mcs/kit/config';

export function loadEnv(source: NodeJS.ProcessEnv = process.env) {
  const base = parseEnv(baseEnvSchema, source);
  return { ...base, port: servicePort('messaging', source), socketPath: serviceSocket('messaging', source) };
}
export type Env = ReturnType<typeof loadEnv>;
