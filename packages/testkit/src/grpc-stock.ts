// Stock gRPC clients for the standard health and reflection protocols: @grpc/grpc-js with the
// proto files loaded at run time by @grpc/proto-loader, exactly as a third party would call us
// (none of our generated code, none of connect-es).
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO = fileURLToPath(new URL('../../../proto/', import.meta.url));

function load(file: string) {
  const def = protoLoader.loadSync(file, {
    includeDirs: [PROTO],
    keepCase: true,
    enums: String,
    defaults: true,
  });
  return grpc.loadPackageDefinition(def);
}

type Ctor = new (address: string, creds: grpc.ChannelCredentials) => grpc.Client;
// biome-ignore lint/suspicious/noExplicitAny: proto-loader packages are untyped trees
const ctorAt = (tree: any, path: string[]): Ctor => path.reduce((t, k) => t[k], tree) as Ctor;

export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

export interface StockHealthClient {
  check(service?: string, deadlineMs?: number): Promise<ServingStatus>;
  /** Opens a Watch; `statuses` fills as the server sends; `cancel` ends it. */
  watch(service?: string): {
    statuses: ServingStatus[];
    error: () => grpc.ServiceError | undefined;
    cancel(): void;
  };
  close(): void;
}

export function stockHealthClient(address: string): StockHealthClient {
  const Health = ctorAt(load('grpc/health/v1/health.proto'), ['grpc', 'health', 'v1', 'Health']);
  // biome-ignore lint/suspicious/noExplicitAny: the generated client's methods are untyped
  const client = new Health(address, grpc.credentials.createInsecure()) as any;
  return {
    check: (service = '', deadlineMs = 5_000) =>
      new Promise((resolve, reject) => {
        client.Check(
          { service },
          { deadline: Date.now() + deadlineMs },
          (err: grpc.ServiceError | null, res: { status: ServingStatus }) =>
            err ? reject(err) : resolve(res.status),
        );
      }),
    watch(service = '') {
      const statuses: ServingStatus[] = [];
      let error: grpc.ServiceError | undefined;
      const call = client.Watch({ service });
      call.on('data', (res: { status: ServingStatus }) => statuses.push(res.status));
      call.on('error', (err: grpc.ServiceError) => {
        error = err;
      });
      return { statuses, error: () => error, cancel: () => call.cancel() };
    },
    close: () => client.close(),
  };
}

export interface ReflectionAnswer {
  list_services_response?: { service: Array<{ name: string }> };
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  all_extension_numbers_response?: { base_type_name: string; extension_number: number[] };
  error_response?: { error_code: number; error_message: string };
}

/** One reflection stream (v1 or v1alpha): each `ask` sends a request and resolves its answer. */
export function stockReflectionClient(address: string, version: 'v1' | 'v1alpha') {
  const Reflection = ctorAt(load(`grpc/reflection/${version}/reflection.proto`), [
    'grpc',
    'reflection',
    version,
    'ServerReflection',
  ]);
  // biome-ignore lint/suspicious/noExplicitAny: the generated client's methods are untyped
  const client = new Reflection(address, grpc.credentials.createInsecure()) as any;
  const call = client.ServerReflectionInfo();
  const waiting: Array<{ resolve: (a: ReflectionAnswer) => void; reject: (e: Error) => void }> = [];
  call.on('data', (res: ReflectionAnswer) => waiting.shift()?.resolve(res));
  call.on('error', (err: Error) => {
    for (const w of waiting.splice(0)) w.reject(err);
  });
  return {
    ask(request: Record<string, unknown>): Promise<ReflectionAnswer> {
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        call.write({ host: '', ...request });
      });
    },
    close() {
      call.end();
      client.close();
    },
  };
}
