// Every service as a gRPC tool sees it: grpc.health.v1.Health (Check, List-less probes, Watch)
// and server reflection v1 + v1alpha, called with stock @grpc/grpc-js + @grpc/proto-loader clients
// and with `buf curl` (reflection only, no proto files). NOT_SERVING during outages is proven
// in faults.test.ts, where the stack runs on private PostgreSQL and NATS servers.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { SERVICES } from '@mcs/kit/config';
import { registry } from '@mcs/proto';
import {
  REPO_ROOT,
  type Stack,
  startStack,
  stockHealthClient,
  stockReflectionClient,
  until,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack?.stop());

/** The gRPC services each process serves besides health and reflection: those of its proto package. */
const EXPECTED = Object.fromEntries(
  SERVICES.map((service) => [
    service,
    [...registry]
      .flatMap((d) => (d.kind === 'service' && d.typeName.split('.')[1] === service ? [d.typeName] : []))
      .sort(),
  ]),
) as Record<(typeof SERVICES)[number], string[]>;
const STANDARD = [
  'grpc.health.v1.Health',
  'grpc.reflection.v1.ServerReflection',
  'grpc.reflection.v1alpha.ServerReflection',
];

async function bufCurl(args: string[]): Promise<string> {
  const { stdout } = await run(`${REPO_ROOT}node_modules/.bin/buf`, ['curl', '--protocol', 'grpc', ...args], {
    timeout: 60_000,
  });
  return stdout;
}

describe.each(SERVICES)('the %s service', (service) => {
  const address = () => `127.0.0.1:${stack.ports[service]}`;

  it('answers grpc.health.v1.Health Check and Watch: SERVING, NOT_FOUND for unknown names', async () => {
    const health = stockHealthClient(address());
    try {
      expect(await health.check('')).toBe('SERVING');
      for (const name of EXPECTED[service]) expect(await health.check(name), name).toBe('SERVING');
      await expect(health.check('no.such.Service')).rejects.toMatchObject({ code: 5 }); // NOT_FOUND
      const watch = health.watch('');
      const unknown = health.watch('no.such.Service');
      await until(
        'a first status from both watches',
        () => watch.statuses.length > 0 && unknown.statuses.length > 0,
      );
      expect(watch.statuses).toEqual(['SERVING']);
      expect(unknown.statuses).toEqual(['SERVICE_UNKNOWN']);
      watch.cancel();
      unknown.cancel();
    } finally {
      health.close();
    }
  });

  it.each(['v1', 'v1alpha'] as const)('serves reflection %s to a stock client', async (version) => {
    const reflection = stockReflectionClient(address(), version);
    try {
      const listed = await reflection.ask({ list_services: '' });
      const names = listed.list_services_response?.service.map((s) => s.name) ?? [];
      expect(names.sort()).toEqual([...EXPECTED[service], ...STANDARD].sort());
      for (const name of [...EXPECTED[service], 'grpc.health.v1.Health']) {
        const answer = await reflection.ask({ file_containing_symbol: name });
        const files = (answer.file_descriptor_response?.file_descriptor_proto ?? []).map((b) =>
          fromBinary(FileDescriptorProtoSchema, b),
        );
        const [file] = files;
        const short = name.split('.').at(-1);
        const declared = file?.service.find((s) => s.name === short);
        expect(declared, `${name} in ${file?.name}`).toBeDefined();
        expect(declared?.method.length).toBeGreaterThan(0);
        // Every import comes along, so a client can build the descriptors without another round trip.
        const sent = new Set(files.map((f) => f.name));
        for (const f of files)
          for (const dep of f.dependency) expect(sent, `${f.name} → ${dep}`).toContain(dep);
        // A method's full name resolves too, and so does the file by name.
        const method = `${name}.${declared?.method[0]?.name}`;
        const byMethod = await reflection.ask({ file_containing_symbol: method });
        expect(byMethod.file_descriptor_response?.file_descriptor_proto.length, method).toBeGreaterThan(0);
        const byName = await reflection.ask({ file_by_filename: file?.name });
        expect(byName.file_descriptor_response?.file_descriptor_proto[0]).toEqual(
          answer.file_descriptor_response?.file_descriptor_proto[0],
        );
      }
      const missing = await reflection.ask({ file_containing_symbol: 'no.such.Thing' });
      expect(missing.error_response?.error_code).toBe(5);
      const exts = await reflection.ask({ all_extension_numbers_of_type: 'google.protobuf.MethodOptions' });
      expect(exts.all_extension_numbers_response?.extension_number.length).toBeGreaterThan(0);
    } finally {
      reflection.close();
    }
  });

  it.each(['grpc-v1', 'grpc-v1alpha'])(
    'lists and calls services with buf curl (%s reflection)',
    async (protocol) => {
      const url = `http://${address()}`;
      const common = ['--http2-prior-knowledge', '--reflect-protocol', protocol];
      const services = (await bufCurl([...common, '--list-services', url])).trim().split('\n').sort();
      expect(services).toEqual([...EXPECTED[service], ...STANDARD].sort());
      const methods = await bufCurl([...common, '--list-methods', url]);
      expect(methods).toContain('grpc.health.v1.Health/Watch');
      const checked = await bufCurl([
        ...common,
        '--data',
        '{"service":""}',
        `${url}/grpc.health.v1.Health/Check`,
      ]);
      expect(JSON.parse(checked)).toEqual({ status: 'SERVING' });
    },
  );
});
